//! algs.rs — ML-DSA (FIPS 204) and ML-KEM (FIPS 203) over the six parameter
//! sets, with byte slices in and out, on integritychain's fips204/fips203
//! crates (docs/PQ-DRIVER.md says why those).  Errors are the CK_RV the
//! driver returns.  Randomness: the OS (getrandom(2)) through rand_core's
//! OsRng.

use crate::ffi::*;
use crate::material::{Alg, Material};
use fips203::traits::{Decaps, Encaps, KeyGen as KemKeyGen, SerDes as KemSerDes};
use fips204::traits::{KeyGen as DsaKeyGen, SerDes as DsaSerDes, Signer, Verifier};
use rand_core::{OsRng, RngCore};
use zeroize::Zeroizing;

pub type Result<T> = core::result::Result<T, CkRv>;

/// Runs `$body` with `$m` bound to the fips204 module of an ML-DSA `$alg`.
macro_rules! with_dsa {
    ($alg:expr, $m:ident => $body:block) => {
        match $alg {
            Alg::MlDsa44 => { use fips204::ml_dsa_44 as $m; $body }
            Alg::MlDsa65 => { use fips204::ml_dsa_65 as $m; $body }
            Alg::MlDsa87 => { use fips204::ml_dsa_87 as $m; $body }
            _ => Err(CKR_KEY_TYPE_INCONSISTENT),
        }
    };
}

/// Runs `$body` with `$m` bound to the fips203 module of an ML-KEM `$alg`.
macro_rules! with_kem {
    ($alg:expr, $m:ident => $body:block) => {
        match $alg {
            Alg::MlKem512 => { use fips203::ml_kem_512 as $m; $body }
            Alg::MlKem768 => { use fips203::ml_kem_768 as $m; $body }
            Alg::MlKem1024 => { use fips203::ml_kem_1024 as $m; $body }
            _ => Err(CKR_KEY_TYPE_INCONSISTENT),
        }
    };
}

/// Bytes of the expanded private key: sk (FIPS 204 Table 2) or dk (FIPS 203 Table 3).
pub fn expanded_len(alg: Alg) -> usize {
    match alg {
        Alg::MlDsa44 => 2560,
        Alg::MlDsa65 => 4032,
        Alg::MlDsa87 => 4896,
        Alg::MlKem512 => 1632,
        Alg::MlKem768 => 2400,
        Alg::MlKem1024 => 3168,
    }
}

/// Bytes of the public key: pk (FIPS 204) or ek (FIPS 203).
pub fn public_len(alg: Alg) -> usize {
    match alg {
        Alg::MlDsa44 => 1312,
        Alg::MlDsa65 => 1952,
        Alg::MlDsa87 => 2592,
        Alg::MlKem512 => 800,
        Alg::MlKem768 => 1184,
        Alg::MlKem1024 => 1568,
    }
}

/// Bytes of a signature (ML-DSA) or ciphertext (ML-KEM).
pub fn output_len(alg: Alg) -> usize {
    match alg {
        Alg::MlDsa44 => 2420,
        Alg::MlDsa65 => 3309,
        Alg::MlDsa87 => 4627,
        Alg::MlKem512 => 768,
        Alg::MlKem768 => 1088,
        Alg::MlKem1024 => 1568,
    }
}

/// Fills a fresh seed of alg.seed_len() bytes from the OS.
pub fn random_seed(alg: Alg) -> Result<Zeroizing<Vec<u8>>> {
    let mut seed = Zeroizing::new(vec![0u8; alg.seed_len()]);
    OsRng.try_fill_bytes(&mut seed).map_err(|_| CKR_DEVICE_ERROR)?;
    Ok(seed)
}

fn array<const N: usize>(bytes: &[u8], err: CkRv) -> Result<[u8; N]> {
    bytes.try_into().map_err(|_| err)
}

/// The ML-DSA private key of `mat`: from the seed (ML-DSA.KeyGen_internal,
/// FIPS 204 Alg. 6) or the expanded sk (Alg. 25); with both, they must agree.
macro_rules! dsa_private {
    ($m:ident, $mat:expr) => {{
        let mat: &Material = $mat;
        let expanded = match &mat.expanded {
            Some(e) => Some($m::PrivateKey::try_from_bytes(array(e, CKR_KEY_HANDLE_INVALID)?)
                .map_err(|_| CKR_KEY_HANDLE_INVALID)?),
            None => None,
        };
        match (&mat.seed, expanded) {
            (Some(seed), expanded) => {
                let (_, sk) = $m::KG::keygen_from_seed(&array(seed, CKR_KEY_HANDLE_INVALID)?);
                if let Some(e) = expanded {
                    let same = Zeroizing::new(sk.clone().into_bytes()) == Zeroizing::new(e.into_bytes());
                    if !same {
                        return Err(CKR_KEY_HANDLE_INVALID);
                    }
                }
                sk
            }
            (None, Some(e)) => e,
            (None, None) => return Err(CKR_KEY_HANDLE_INVALID),
        }
    }};
}

/// The ML-KEM decapsulation key of `mat`: from d‖z (ML-KEM.KeyGen_internal,
/// FIPS 203 Alg. 16) or the expanded dk with its §7.3 input checks; with
/// both, they must agree.
macro_rules! kem_private {
    ($m:ident, $mat:expr) => {{
        let mat: &Material = $mat;
        let expanded = match &mat.expanded {
            Some(e) => Some($m::DecapsKey::try_from_bytes(array(e, CKR_KEY_HANDLE_INVALID)?)
                .map_err(|_| CKR_KEY_HANDLE_INVALID)?),
            None => None,
        };
        match (&mat.seed, expanded) {
            (Some(seed), expanded) => {
                let d: [u8; 32] = array(&seed[..32], CKR_KEY_HANDLE_INVALID)?;
                let z: [u8; 32] = array(&seed[32..], CKR_KEY_HANDLE_INVALID)?;
                let (ek, dk) = $m::KG::keygen_from_seed(d, z);
                if let Some(e) = expanded {
                    if Zeroizing::new(dk.clone().into_bytes()) != Zeroizing::new(e.into_bytes()) {
                        return Err(CKR_KEY_HANDLE_INVALID);
                    }
                }
                (Some(ek), dk)
            }
            (None, Some(e)) => (None, e),
            (None, None) => return Err(CKR_KEY_HANDLE_INVALID),
        }
    }};
}

/// The public key of a private key: pk (FIPS 204 Alg. 22) or ek (FIPS 203).
pub fn public_key(mat: &Material) -> Result<Vec<u8>> {
    if mat.alg.is_dsa() {
        with_dsa!(mat.alg, m => {
            let sk = dsa_private!(m, mat);
            Ok(sk.get_public_key().into_bytes().to_vec())
        })
    } else {
        with_kem!(mat.alg, m => {
            let (ek, dk) = kem_private!(m, mat);
            match ek {
                Some(ek) => Ok(ek.into_bytes().to_vec()),
                // dk = dk_PKE ‖ ek ‖ H(ek) ‖ z (FIPS 203 Alg. 16 line 3).
                None => {
                    let dk = Zeroizing::new(dk.into_bytes());
                    let at = public_len(mat.alg) - 32; // |dk_PKE| = 384k, |ek| = 384k + 32
                    Ok(dk[at..at + public_len(mat.alg)].to_vec())
                }
            }
        })
    }
}

/// Pure ML-DSA signature (FIPS 204 Alg. 2) of `msg` with context `ctx`
/// (0..255 bytes) and per-signature randomness `rnd` (all zero: the
/// deterministic variant, §3.4).
pub fn sign(mat: &Material, msg: &[u8], ctx: &[u8], rnd: &[u8; 32]) -> Result<Vec<u8>> {
    if ctx.len() > 255 {
        return Err(CKR_MECHANISM_PARAM_INVALID);
    }
    with_dsa!(mat.alg, m => {
        let sk = dsa_private!(m, mat);
        let sig = sk.try_sign_with_seed(rnd, msg, ctx).map_err(|_| CKR_DEVICE_ERROR)?;
        Ok(sig.to_vec())
    })
}

/// ML-DSA.Verify (FIPS 204 Alg. 3).  Ok(()) when valid.
pub fn verify(alg: Alg, public: &[u8], msg: &[u8], ctx: &[u8], sig: &[u8]) -> Result<()> {
    if ctx.len() > 255 {
        return Err(CKR_MECHANISM_PARAM_INVALID);
    }
    with_dsa!(alg, m => {
        let pk = m::PublicKey::try_from_bytes(array(public, CKR_PUBLIC_KEY_INVALID)?)
            .map_err(|_| CKR_PUBLIC_KEY_INVALID)?;
        let sig: [u8; m::SIG_LEN] = array(sig, CKR_SIGNATURE_LEN_RANGE)?;
        if pk.verify(msg, &sig, ctx) { Ok(()) } else { Err(CKR_SIGNATURE_INVALID) }
    })
}

/// ML-KEM.Encaps (FIPS 203 Alg. 20) to `public`, with the §7.2 input check;
/// `m` given (tests, KATs) or drawn from the OS.  Returns (ciphertext, secret).
pub fn encapsulate(alg: Alg, public: &[u8], m_seed: Option<&[u8; 32]>)
    -> Result<(Vec<u8>, Zeroizing<[u8; 32]>)>
{
    with_kem!(alg, m => {
        let ek = m::EncapsKey::try_from_bytes(array(public, CKR_PUBLIC_KEY_INVALID)?)
            .map_err(|_| CKR_PUBLIC_KEY_INVALID)?;
        let (ssk, ct) = match m_seed {
            Some(seed) => ek.encaps_from_seed(seed),
            None => ek.try_encaps_with_rng(&mut OsRng).map_err(|_| CKR_DEVICE_ERROR)?,
        };
        Ok((ct.into_bytes().to_vec(), Zeroizing::new(ssk.into_bytes())))
    })
}

/// ML-KEM.Decaps (FIPS 203 Alg. 21): the shared secret of `ct`, or the
/// implicit-rejection secret when `ct` was altered.
pub fn decapsulate(mat: &Material, ct: &[u8]) -> Result<Zeroizing<[u8; 32]>> {
    with_kem!(mat.alg, m => {
        let (_, dk) = kem_private!(m, mat);
        let ct = m::CipherText::try_from_bytes(array(ct, CKR_ENCRYPTED_DATA_LEN_RANGE)?)
            .map_err(|_| CKR_ENCRYPTED_DATA_LEN_RANGE)?;
        let ssk = dk.try_decaps(&ct).map_err(|_| CKR_DEVICE_ERROR)?;
        Ok(Zeroizing::new(ssk.into_bytes()))
    })
}
