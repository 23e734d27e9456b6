//! material.rs — the PKCS#8 form of ML-DSA and ML-KEM private keys, as the
//! broker's "key material" path carries them (cs_drv_key_t.pkcs8; format in
//! docs/PQ-DRIVER.md).
//!
//! OneAsymmetricKey (RFC 5958) with the algorithm's OID and no parameters,
//! whose privateKey OCTET STRING holds the CHOICE of RFC 9881 §6 (ML-DSA) and
//! of the LAMPS ML-KEM profile (draft-ietf-lamps-kyber-certificates §6):
//!
//!   seed        [0] IMPLICIT OCTET STRING   32 bytes ξ (ML-DSA) or 64 bytes d‖z (ML-KEM)
//!   expandedKey OCTET STRING                sk (FIPS 204 Alg. 24) or dk (FIPS 203 Alg. 16)
//!   both        SEQUENCE { seed OCTET STRING, expandedKey OCTET STRING }
//!
//! We write the seed form only (the smallest, and the one those documents
//! recommend); we read all three.  DER only: definite lengths, no trailing
//! bytes.  Secrets are kept in `Zeroizing` buffers.

use zeroize::Zeroizing;

/// The six parameter sets: the algorithm and its PKCS#11 3.2 CKP_* value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Alg {
    MlDsa44,
    MlDsa65,
    MlDsa87,
    MlKem512,
    MlKem768,
    MlKem1024,
}

/// NIST's OID arc 2.16.840.1.101.3.4 (DER content bytes), then the tail.
const NIST_ARC: [u8; 7] = [0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04];

impl Alg {
    /// The last two OID arcs: sigAlgs 3.17-19 (RFC 9881), kems 4.1-3.
    fn oid_tail(self) -> [u8; 2] {
        match self {
            Alg::MlDsa44 => [0x03, 0x11],
            Alg::MlDsa65 => [0x03, 0x12],
            Alg::MlDsa87 => [0x03, 0x13],
            Alg::MlKem512 => [0x04, 0x01],
            Alg::MlKem768 => [0x04, 0x02],
            Alg::MlKem1024 => [0x04, 0x03],
        }
    }

    pub fn all() -> [Alg; 6] {
        [Alg::MlDsa44, Alg::MlDsa65, Alg::MlDsa87, Alg::MlKem512, Alg::MlKem768, Alg::MlKem1024]
    }

    pub fn is_dsa(self) -> bool {
        matches!(self, Alg::MlDsa44 | Alg::MlDsa65 | Alg::MlDsa87)
    }

    /// CKA_PARAMETER_SET: CKP_ML_DSA_44/65/87 or CKP_ML_KEM_512/768/1024 (1..3).
    pub fn parameter_set(self) -> u64 {
        match self {
            Alg::MlDsa44 | Alg::MlKem512 => 1,
            Alg::MlDsa65 | Alg::MlKem768 => 2,
            Alg::MlDsa87 | Alg::MlKem1024 => 3,
        }
    }

    pub fn dsa(parameter_set: u64) -> Option<Alg> {
        [Alg::MlDsa44, Alg::MlDsa65, Alg::MlDsa87].into_iter().find(|a| a.parameter_set() == parameter_set)
    }

    pub fn kem(parameter_set: u64) -> Option<Alg> {
        [Alg::MlKem512, Alg::MlKem768, Alg::MlKem1024].into_iter().find(|a| a.parameter_set() == parameter_set)
    }

    /// Bytes of the seed form: ξ (FIPS 204 Alg. 1) or d‖z (FIPS 203 Alg. 19).
    pub fn seed_len(self) -> usize {
        if self.is_dsa() { 32 } else { 64 }
    }

    /// The name NIST's ACVP files use ("ML-DSA-65").
    pub fn name(self) -> &'static str {
        match self {
            Alg::MlDsa44 => "ML-DSA-44",
            Alg::MlDsa65 => "ML-DSA-65",
            Alg::MlDsa87 => "ML-DSA-87",
            Alg::MlKem512 => "ML-KEM-512",
            Alg::MlKem768 => "ML-KEM-768",
            Alg::MlKem1024 => "ML-KEM-1024",
        }
    }
}

/// A parsed private key: at least one of seed and expanded.
pub struct Material {
    pub alg: Alg,
    pub seed: Option<Zeroizing<Vec<u8>>>,
    pub expanded: Option<Zeroizing<Vec<u8>>>,
}

/// One DER TLV read from `input`: (tag, content, rest).
fn tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (first as usize, rest)
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 3 || rest.len() < n {
            return None; // indefinite or absurd lengths
        }
        let len = rest[..n].iter().fold(0usize, |acc, &b| (acc << 8) | b as usize);
        if len < 0x80 || rest[0] == 0 {
            return None; // not the minimal (DER) length encoding
        }
        (len, &rest[n..])
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

/// Appends one DER TLV.
fn put(out: &mut Vec<u8>, tag: u8, content: &[u8]) {
    out.push(tag);
    let len = content.len();
    if len < 0x80 {
        out.push(len as u8);
    } else if len < 0x100 {
        out.extend_from_slice(&[0x81, len as u8]);
    } else if len < 0x10000 {
        out.extend_from_slice(&[0x82, (len >> 8) as u8, len as u8]);
    } else {
        out.extend_from_slice(&[0x83, (len >> 16) as u8, (len >> 8) as u8, len as u8]);
    }
    out.extend_from_slice(content);
}

/// The PKCS#8 DER of the seed form of a key of `alg`; `seed` must have
/// alg.seed_len() bytes.  The result is a secret: the caller wipes it.
pub fn encode_seed(alg: Alg, seed: &[u8]) -> Zeroizing<Vec<u8>> {
    assert_eq!(seed.len(), alg.seed_len());
    let mut oid = NIST_ARC.to_vec();
    oid.extend_from_slice(&alg.oid_tail());
    let mut alg_id = Vec::new();
    put(&mut alg_id, 0x06, &oid);
    let mut inner = Zeroizing::new(Vec::new());
    put(&mut inner, 0x80, seed);
    let mut body = Zeroizing::new(Vec::new());
    put(&mut body, 0x02, &[0x00]);
    put(&mut body, 0x30, &alg_id);
    put(&mut body, 0x04, &inner);
    let mut der = Zeroizing::new(Vec::new());
    put(&mut der, 0x30, &body);
    der
}

/// Parses the PKCS#8 DER of an ML-DSA or ML-KEM private key (any of the
/// three forms; `expanded_len` gives the expanded key's size for `alg`).
/// None when it is anything else or malformed.
pub fn decode(der: &[u8], expanded_len: impl Fn(Alg) -> usize) -> Option<Material> {
    let (tag, body, rest) = tlv(der)?;
    if tag != 0x30 || !rest.is_empty() {
        return None;
    }
    let (tag, version, body) = tlv(body)?;
    if tag != 0x02 || (version != [0] && version != [1]) {
        return None;
    }
    let (tag, alg_id, body) = tlv(body)?;
    let (otag, oid, params) = tlv(alg_id)?;
    if tag != 0x30 || otag != 0x06 || !params.is_empty() || oid.len() != 9 || oid[..7] != NIST_ARC {
        return None;
    }
    let alg = Alg::all().into_iter().find(|a| oid[7..] == a.oid_tail())?;
    let (tag, key, _attributes_and_public_key) = tlv(body)?;
    if tag != 0x04 {
        return None;
    }
    let (tag, content, rest) = tlv(key)?;
    if !rest.is_empty() {
        return None;
    }
    let (seed, expanded) = match tag {
        0x80 => (Some(content), None),
        0x04 => (None, Some(content)),
        0x30 => {
            let (t1, s, r) = tlv(content)?;
            let (t2, e, r) = tlv(r)?;
            if t1 != 0x04 || t2 != 0x04 || !r.is_empty() {
                return None;
            }
            (Some(s), Some(e))
        }
        _ => return None,
    };
    if seed.is_some_and(|s| s.len() != alg.seed_len())
        || expanded.is_some_and(|e| e.len() != expanded_len(alg))
    {
        return None;
    }
    Some(Material {
        alg,
        seed: seed.map(|s| Zeroizing::new(s.to_vec())),
        expanded: expanded.map(|e| Zeroizing::new(e.to_vec())),
    })
}

/// The PKCS#8 DER of the expanded form (tests and KATs: NIST's vectors give
/// expanded keys).
pub fn encode_expanded(alg: Alg, expanded: &[u8]) -> Zeroizing<Vec<u8>> {
    let mut oid = NIST_ARC.to_vec();
    oid.extend_from_slice(&alg.oid_tail());
    let mut alg_id = Vec::new();
    put(&mut alg_id, 0x06, &oid);
    let mut inner = Zeroizing::new(Vec::new());
    put(&mut inner, 0x04, expanded);
    let mut body = Zeroizing::new(Vec::new());
    put(&mut body, 0x02, &[0x00]);
    put(&mut body, 0x30, &alg_id);
    put(&mut body, 0x04, &inner);
    let mut der = Zeroizing::new(Vec::new());
    put(&mut der, 0x30, &body);
    der
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_form_round_trips_and_matches_rfc9881_prefix() {
        let der = encode_seed(Alg::MlDsa44, &[7u8; 32]);
        // The seed-only shape of RFC 9881 §6: 54 bytes, the seed after this prefix.
        assert_eq!(der.len(), 54);
        assert_eq!(der[..22], [0x30, 0x34, 0x02, 0x01, 0x00, 0x30, 0x0b, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01,
                               0x65, 0x03, 0x04, 0x03, 0x11, 0x04, 0x22, 0x80, 0x20]);
        let m = decode(&der, |_| 2560).unwrap();
        assert_eq!(m.alg, Alg::MlDsa44);
        assert_eq!(m.seed.unwrap().as_slice(), &[7u8; 32]);
        assert!(m.expanded.is_none());
        let kem = encode_seed(Alg::MlKem768, &[9u8; 64]);
        assert_eq!(decode(&kem, |_| 2400).unwrap().alg, Alg::MlKem768);
    }

    #[test]
    fn rejects_malformed_material() {
        let der = encode_seed(Alg::MlKem512, &[1u8; 64]);
        for cut in 0..der.len() {
            assert!(decode(&der[..cut], |_| 1632).is_none(), "prefix {cut}");
        }
        let mut trailing = der.to_vec();
        trailing.push(0);
        assert!(decode(&trailing, |_| 1632).is_none());
        let mut bad_oid = der.to_vec();
        bad_oid[17] = 0x09; // 2.16.840.1.101.3.4.4.9: no such KEM
        assert!(decode(&bad_oid, |_| 1632).is_none());
        // An expanded key of the wrong size.
        assert!(decode(&encode_expanded(Alg::MlKem512, &[0u8; 100]), |_| 1632).is_none());
    }
}
