//! NIST ACVP known-answer tests of the pq driver's algorithms, on the subset
//! in testdata/acvp-subset.txt (source and selection: testdata/acvp_subset.py):
//! ML-DSA keyGen, sigGen, sigVer and ML-KEM keyGen, encapsulation,
//! decapsulation, for every parameter set.  The key material goes through
//! the driver's own PKCS#8 codec (seed, expanded and both forms).

use pq::algs;
use pq::ffi::*;
use pq::material::{self, Alg, Material};
use std::collections::BTreeMap;

type Case = BTreeMap<String, Vec<u8>>;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

/// (parameter set, test, tcId) -> field -> bytes.
fn cases() -> BTreeMap<(String, String, u32), Case> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/acvp-subset.txt");
    let text = std::fs::read_to_string(path).unwrap();
    let mut out: BTreeMap<(String, String, u32), Case> = BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let f: Vec<&str> = line.split(' ').collect();
        let key = (f[0].to_string(), f[1].to_string(), f[2].parse().unwrap());
        out.entry(key).or_default().insert(f[3].to_string(), hex(f[4]));
    }
    out
}

fn select(set: &str, test: &str) -> Vec<Case> {
    let all: Vec<Case> = cases().into_iter().filter(|((s, t, _), _)| s == set && t == test).map(|(_, c)| c).collect();
    assert!(!all.is_empty(), "no {set} {test} vectors");
    all
}

fn parse(der: &[u8]) -> Material {
    material::decode(der, algs::expanded_len).expect("our own DER parses")
}

/// The PKCS#8 "both" form: SEQUENCE { seed, expandedKey } in the OCTET STRING.
fn both(alg: Alg, seed: &[u8], expanded: &[u8]) -> Material {
    Material { alg, seed: Some(seed.to_vec().into()), expanded: Some(expanded.to_vec().into()) }
}

const DSA: [Alg; 3] = [Alg::MlDsa44, Alg::MlDsa65, Alg::MlDsa87];
const KEM: [Alg; 3] = [Alg::MlKem512, Alg::MlKem768, Alg::MlKem1024];

#[test]
fn ml_dsa_keygen_from_seed() {
    for alg in DSA {
        for c in select(alg.name(), "keyGen") {
            let mat = parse(&material::encode_seed(alg, &c["seed"]));
            assert_eq!(algs::public_key(&mat).unwrap(), c["pk"], "{}", alg.name());
            // The expanded sk of the vector is the one the seed expands to.
            assert_eq!(algs::public_key(&both(alg, &c["seed"], &c["sk"])).unwrap(), c["pk"]);
            let mut wrong = c["sk"].clone();
            wrong[40] ^= 1;
            assert_eq!(algs::public_key(&both(alg, &c["seed"], &wrong)).err(), Some(CKR_KEY_HANDLE_INVALID));
        }
    }
}

/// An RNG that yields the vector's rnd (FIPS 204 Alg. 7's 32 bytes).
struct Fixed([u8; 32]);
impl rand_core::RngCore for Fixed {
    fn next_u32(&mut self) -> u32 { unimplemented!() }
    fn next_u64(&mut self) -> u64 { unimplemented!() }
    fn fill_bytes(&mut self, out: &mut [u8]) { out.copy_from_slice(&self.0) }
    fn try_fill_bytes(&mut self, out: &mut [u8]) -> Result<(), rand_core::Error> {
        out.copy_from_slice(&self.0);
        Ok(())
    }
}
impl rand_core::CryptoRng for Fixed {}

macro_rules! sig_internal {
    ($m:ident, $c:expr) => {{
        use fips204::traits::SerDes;
        let c: &Case = $c;
        let sk = fips204::$m::PrivateKey::try_from_bytes(c["sk"].clone().try_into().unwrap()).unwrap();
        let rnd: [u8; 32] = c["rnd"].clone().try_into().unwrap();
        let hedged = rnd != [0u8; 32];
        #[allow(deprecated)]
        let sig = sk.sign_internal(&mut Fixed(rnd), &c["message"], hedged).unwrap();
        sig.to_vec()
    }};
}

macro_rules! ver_internal {
    ($m:ident, $c:expr) => {{
        use fips204::traits::SerDes;
        let c: &Case = $c;
        let pk = fips204::$m::PublicKey::try_from_bytes(c["pk"].clone().try_into().unwrap()).unwrap();
        #[allow(deprecated)]
        let ok = pk.verify_internal(&c["message"], &c["signature"].clone().try_into().unwrap());
        ok
    }};
}

#[test]
fn ml_dsa_siggen_internal() {
    for alg in DSA {
        for c in select(alg.name(), "sigGen") {
            let sig = match alg {
                Alg::MlDsa44 => sig_internal!(ml_dsa_44, &c),
                Alg::MlDsa65 => sig_internal!(ml_dsa_65, &c),
                _ => sig_internal!(ml_dsa_87, &c),
            };
            assert_eq!(sig, c["signature"], "{}", alg.name());
        }
    }
}

#[test]
fn ml_dsa_sigver_internal() {
    for alg in DSA {
        for c in select(alg.name(), "sigVer") {
            let ok = match alg {
                Alg::MlDsa44 => ver_internal!(ml_dsa_44, &c),
                Alg::MlDsa65 => ver_internal!(ml_dsa_65, &c),
                _ => ver_internal!(ml_dsa_87, &c),
            };
            assert_eq!(ok, c["testPassed"] == [1], "{}", alg.name());
        }
    }
}

#[test]
fn ml_kem_keygen_from_seed() {
    for alg in KEM {
        for c in select(alg.name(), "keyGen") {
            let seed = [c["d"].clone(), c["z"].clone()].concat();
            let mat = parse(&material::encode_seed(alg, &seed));
            assert_eq!(algs::public_key(&mat).unwrap(), c["ek"], "{}", alg.name());
            assert_eq!(algs::public_key(&both(alg, &seed, &c["dk"])).unwrap(), c["ek"]);
            // The expanded form alone: ek is read out of dk.
            let expanded = parse(&material::encode_expanded(alg, &c["dk"]));
            assert_eq!(algs::public_key(&expanded).unwrap(), c["ek"]);
        }
    }
}

#[test]
fn ml_kem_encapsulation() {
    for alg in KEM {
        for c in select(alg.name(), "encap") {
            let m: [u8; 32] = c["m"].clone().try_into().unwrap();
            let (ct, k) = algs::encapsulate(alg, &c["ek"], Some(&m)).unwrap();
            assert_eq!(ct, c["c"], "{}", alg.name());
            assert_eq!(k.to_vec(), c["k"]);
        }
    }
}

#[test]
fn ml_kem_decapsulation_with_implicit_rejection() {
    for alg in KEM {
        for c in select(alg.name(), "decap") {
            let mat = parse(&material::encode_expanded(alg, &c["dk"]));
            assert_eq!(algs::decapsulate(&mat, &c["c"]).unwrap().to_vec(), c["k"], "{}", alg.name());
        }
    }
}

#[test]
fn ml_dsa_pure_sign_verify_with_context() {
    for alg in DSA {
        let mat = parse(&material::encode_seed(alg, &algs::random_seed(alg).unwrap()));
        let pk = algs::public_key(&mat).unwrap();
        let ctx = [0x5au8; 255];
        let sig = algs::sign(&mat, b"message", &ctx, &[0u8; 32]).unwrap();
        assert_eq!(sig.len(), algs::output_len(alg));
        assert_eq!(sig, algs::sign(&mat, b"message", &ctx, &[0u8; 32]).unwrap(), "deterministic");
        assert_eq!(algs::verify(alg, &pk, b"message", &ctx, &sig), Ok(()));
        assert_eq!(algs::verify(alg, &pk, b"message", &ctx[1..], &sig), Err(CKR_SIGNATURE_INVALID));
        assert_eq!(algs::verify(alg, &pk, b"messagE", &ctx, &sig), Err(CKR_SIGNATURE_INVALID));
        assert_eq!(algs::verify(alg, &pk, b"message", &ctx, &sig[1..]), Err(CKR_SIGNATURE_LEN_RANGE));
        assert_eq!(algs::verify(alg, &pk[1..], b"message", &ctx, &sig), Err(CKR_PUBLIC_KEY_INVALID));
        let long = [0u8; 256];
        assert_eq!(algs::sign(&mat, b"m", &long, &[0u8; 32]).err(), Some(CKR_MECHANISM_PARAM_INVALID));
        let hedged = algs::sign(&mat, b"message", &[], &[1u8; 32]).unwrap();
        assert_eq!(algs::verify(alg, &pk, b"message", &[], &hedged), Ok(()));
        assert_ne!(hedged, algs::sign(&mat, b"message", &[], &[0u8; 32]).unwrap());
    }
}

#[test]
fn ml_kem_round_trip_and_input_checks() {
    for alg in KEM {
        let mat = parse(&material::encode_seed(alg, &algs::random_seed(alg).unwrap()));
        let ek = algs::public_key(&mat).unwrap();
        let (ct, k) = algs::encapsulate(alg, &ek, None).unwrap();
        assert_eq!(algs::decapsulate(&mat, &ct).unwrap(), k);
        assert_eq!(algs::decapsulate(&mat, &ct[1..]).err(), Some(CKR_ENCRYPTED_DATA_LEN_RANGE));
        // FIPS 203 §7.2: a coefficient >= q (0xfff) makes the key invalid.
        let mut bad = ek.clone();
        bad[0] = 0xff;
        bad[1] |= 0x0f;
        assert_eq!(algs::encapsulate(alg, &bad, None).err(), Some(CKR_PUBLIC_KEY_INVALID));
        assert_eq!(algs::sign(&mat, b"m", &[], &[0u8; 32]).err(), Some(CKR_KEY_TYPE_INCONSISTENT));
    }
}
