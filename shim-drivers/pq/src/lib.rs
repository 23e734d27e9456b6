//! pq — the post-quantum board driver (pq.so): ML-DSA-44/65/87 (FIPS 204)
//! and ML-KEM-512/768/1024 (FIPS 203) with key material, behind the shim
//! driver ABI of shim-drivers/cs_driver.h.  It exports one symbol,
//! cs_driver_entry(), and the dispatch table below.  Everything runs on the
//! broker's own cores; the board holds no resident keys.  Man page:
//! cryptoserver-drivers(5); design notes: docs/PQ-DRIVER.md.
//!
//! Every exported function catches panics (a bug must not take the broker
//! down: it becomes CKR_DEVICE_ERROR or -1) and checks its pointers.

pub mod algs;
pub mod ffi;
pub mod material;

use core::ffi::{c_char, c_int, c_void, CStr};
use core::ptr;
use ffi::*;
use material::{Alg, Material};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// cs_board_t of this driver: its name, for logs.
pub struct Board {
    _name: String, // for debuggers and future log lines
}

/// cs_drv_session_t of this driver: stateless (no key cache).
pub struct Session {
    _board: *const Board,
}

fn log_error(msg: &str) {
    let line = std::ffi::CString::new(msg.replace('\0', " ")).unwrap_or_default();
    // SAFETY: "%s" with one NUL-terminated string.
    unsafe { zsys_error(c"%s".as_ptr(), line.as_ptr()) };
}

/// Runs `f`, turning a panic into `on_panic` (and a log line).
fn guard<T>(on_panic: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| {
        log_error("pq driver: internal error (panic) in a driver call");
        on_panic
    })
}

/// A borrowed byte slice from C; NULL is the empty slice only when len is 0.
unsafe fn bytes<'a>(p: *const u8, len: usize) -> Option<&'a [u8]> {
    if len == 0 {
        Some(&[])
    } else if p.is_null() {
        None
    } else {
        Some(core::slice::from_raw_parts(p, len))
    }
}

/// Copies `src` to the caller's (out, *out_len) buffer: CKR_BUFFER_TOO_SMALL
/// (with *out_len set to the size needed) when it does not fit.
unsafe fn copy_out(src: &[u8], out: *mut u8, out_len: *mut usize) -> CkRv {
    if out_len.is_null() {
        return CKR_ARGUMENTS_BAD;
    }
    if out.is_null() || *out_len < src.len() {
        *out_len = src.len();
        return CKR_BUFFER_TOO_SMALL;
    }
    ptr::copy_nonoverlapping(src.as_ptr(), out, src.len());
    *out_len = src.len();
    CKR_OK
}

/// The material of `key`: resident keys and unparsable DER are
/// CKR_KEY_HANDLE_INVALID.
unsafe fn key_material(key: *const CsDrvKey) -> algs::Result<Material> {
    let key = key.as_ref().ok_or(CKR_KEY_HANDLE_INVALID)?;
    if !key.id.is_null() || key.pkcs8.is_null() {
        return Err(CKR_KEY_HANDLE_INVALID); // this board has no resident keys
    }
    let der = bytes(key.pkcs8, key.pkcs8_len).ok_or(CKR_KEY_HANDLE_INVALID)?;
    material::decode(der, algs::expanded_len).ok_or(CKR_KEY_HANDLE_INVALID)
}

/// The context string and hedge choice of a CKM_ML_DSA mechanism.
unsafe fn dsa_params<'a>(mech: *const CsDrvMech) -> algs::Result<(&'a [u8], CkUlong)> {
    let mech = mech.as_ref().ok_or(CKR_MECHANISM_INVALID)?;
    if mech.type_ != CKM_ML_DSA {
        return Err(CKR_MECHANISM_INVALID);
    }
    let ctx = bytes(mech.context, mech.context_len).ok_or(CKR_MECHANISM_PARAM_INVALID)?;
    if ctx.len() > 255
        || ![CKH_HEDGE_PREFERRED, CKH_HEDGE_REQUIRED, CKH_DETERMINISTIC_REQUIRED].contains(&mech.hedge)
    {
        return Err(CKR_MECHANISM_PARAM_INVALID);
    }
    Ok((ctx, mech.hedge))
}

fn rv(result: algs::Result<CkRv>) -> CkRv {
    result.unwrap_or_else(|e| e)
}

unsafe extern "C" fn board_open(name: *const c_char, _config: *mut c_void, _base_dir: *const c_char,
                                board_p: *mut *mut Board) -> c_int {
    guard(-1, || {
        if name.is_null() || board_p.is_null() {
            log_error("pq driver: board_open without a name or a result pointer");
            return -1;
        }
        let name = CStr::from_ptr(name).to_string_lossy().into_owned();
        *board_p = Box::into_raw(Box::new(Board { _name: name }));
        0
    })
}

unsafe extern "C" fn board_close(board_p: *mut *mut Board) {
    guard((), || {
        if !board_p.is_null() && !(*board_p).is_null() {
            drop(Box::from_raw(*board_p));
            *board_p = ptr::null_mut();
        }
    })
}

/// The four PKCS#11 3.2 mechanisms; ulMin/MaxKeySize carry the range of
/// CKP_* parameter sets (1..3), as docs/PQ-DRIVER.md explains.
const MECHS: [(CkUlong, CkUlong); 4] = [
    (CKM_ML_DSA_KEY_PAIR_GEN, CKF_GENERATE_KEY_PAIR),
    (CKM_ML_DSA, CKF_SIGN | CKF_VERIFY),
    (CKM_ML_KEM_KEY_PAIR_GEN, CKF_GENERATE_KEY_PAIR),
    (CKM_ML_KEM, CKF_ENCAPSULATE | CKF_DECAPSULATE),
];

unsafe extern "C" fn board_mechanisms(_board: *mut Board, mechs_p: *mut *mut CsMechInfo,
                                      count_p: *mut usize) -> c_int {
    guard(-1, || {
        if mechs_p.is_null() || count_p.is_null() {
            return -1;
        }
        let array = malloc(MECHS.len() * core::mem::size_of::<CsMechInfo>()) as *mut CsMechInfo;
        if array.is_null() {
            return -1;
        }
        for (i, &(type_, flags)) in MECHS.iter().enumerate() {
            array.add(i).write(CsMechInfo { type_, min_key_bits: 1, max_key_bits: 3, flags });
        }
        *mechs_p = array;
        *count_p = MECHS.len();
        0
    })
}

unsafe extern "C" fn board_keys(_board: *mut Board, keys_p: *mut *mut c_void, count_p: *mut usize) -> c_int {
    guard(-1, || {
        if keys_p.is_null() || count_p.is_null() {
            return -1;
        }
        *keys_p = ptr::null_mut(); // no resident keys; free(NULL) is fine
        *count_p = 0;
        0
    })
}

unsafe extern "C" fn session_open(board: *mut Board) -> *mut Session {
    guard(ptr::null_mut(), || {
        if board.is_null() {
            return ptr::null_mut();
        }
        Box::into_raw(Box::new(Session { _board: board }))
    })
}

unsafe extern "C" fn session_close(session_p: *mut *mut Session) {
    guard((), || {
        if !session_p.is_null() && !(*session_p).is_null() {
            drop(Box::from_raw(*session_p));
            *session_p = ptr::null_mut();
        }
    })
}

unsafe extern "C" fn capabilities(_board: *mut Board, caps: *mut CsCaps) -> c_int {
    guard(-1, || {
        let Some(caps) = caps.as_mut() else { return -1 };
        caps.flags = CS_CAP_KEY_MATERIAL | CS_CAP_GENERATE_MATERIAL | CS_CAP_KEM | CS_CAP_PUBLIC_OPS;
        caps.material_types = CS_KT_ML_DSA | CS_KT_ML_KEM;
        caps.generate_types = CS_KT_ML_DSA | CS_KT_ML_KEM;
        0
    })
}

unsafe extern "C" fn sign_key(_session: *mut Session, key: *const CsDrvKey, mech: *const CsDrvMech,
                              input: *const u8, in_len: usize, out: *mut u8, out_len: *mut usize) -> CkRv {
    guard(CKR_DEVICE_ERROR, || rv((|| {
        let (ctx, hedge) = dsa_params(mech)?;
        let mat = key_material(key)?;
        if !mat.alg.is_dsa() {
            return Err(CKR_KEY_TYPE_INCONSISTENT);
        }
        let msg = bytes(input, in_len).ok_or(CKR_ARGUMENTS_BAD)?;
        if out_len.is_null() {
            return Err(CKR_ARGUMENTS_BAD);
        }
        if out.is_null() || *out_len < algs::output_len(mat.alg) {
            *out_len = algs::output_len(mat.alg);
            return Err(CKR_BUFFER_TOO_SMALL);
        }
        let mut rnd = zeroize::Zeroizing::new([0u8; 32]);
        if hedge != CKH_DETERMINISTIC_REQUIRED {
            rand_core::RngCore::try_fill_bytes(&mut rand_core::OsRng, &mut rnd[..])
                .map_err(|_| CKR_DEVICE_ERROR)?;
        }
        let sig = algs::sign(&mat, msg, ctx, &rnd)?;
        Ok(copy_out(&sig, out, out_len))
    })()))
}

unsafe extern "C" fn generate_material(_session: *mut Session, gen: *const CsKeygen,
                                       pkcs8_p: *mut *mut u8, pkcs8_len_p: *mut usize) -> CkRv {
    guard(CKR_DEVICE_ERROR, || rv((|| {
        let gen = gen.as_ref().ok_or(CKR_ARGUMENTS_BAD)?;
        if pkcs8_p.is_null() || pkcs8_len_p.is_null() {
            return Err(CKR_ARGUMENTS_BAD);
        }
        let alg = match gen.mechanism {
            CKM_ML_DSA_KEY_PAIR_GEN => Alg::dsa(gen.parameter_set),
            CKM_ML_KEM_KEY_PAIR_GEN => Alg::kem(gen.parameter_set),
            _ => return Err(CKR_MECHANISM_INVALID),
        }
        .ok_or(CKR_ATTRIBUTE_VALUE_INVALID)?;
        // The seed is the key (FIPS 204 §3.6.3, FIPS 203 §3.3): no expansion here.
        let der = material::encode_seed(alg, &algs::random_seed(alg)?);
        let out = malloc(der.len()) as *mut u8;
        if out.is_null() {
            return Err(CKR_HOST_MEMORY);
        }
        ptr::copy_nonoverlapping(der.as_ptr(), out, der.len());
        *pkcs8_p = out;
        *pkcs8_len_p = der.len();
        Ok(CKR_OK)
    })()))
}

unsafe extern "C" fn public_key(_session: *mut Session, key: *const CsDrvKey, key_type: *mut CkUlong,
                                parameter_set: *mut CkUlong, out: *mut u8, out_len: *mut usize) -> CkRv {
    guard(CKR_DEVICE_ERROR, || rv((|| {
        if key_type.is_null() || parameter_set.is_null() {
            return Err(CKR_ARGUMENTS_BAD);
        }
        let mat = key_material(key)?;
        let public = algs::public_key(&mat)?;
        *key_type = if mat.alg.is_dsa() { CKK_ML_DSA } else { CKK_ML_KEM };
        *parameter_set = mat.alg.parameter_set();
        Ok(copy_out(&public, out, out_len))
    })()))
}

unsafe extern "C" fn verify(_session: *mut Session, mech: *const CsDrvMech, parameter_set: CkUlong,
                            public: *const u8, public_len: usize, input: *const u8, in_len: usize,
                            sig: *const u8, sig_len: usize) -> CkRv {
    guard(CKR_DEVICE_ERROR, || rv((|| {
        let (ctx, _) = dsa_params(mech)?;
        let alg = Alg::dsa(parameter_set).ok_or(CKR_DOMAIN_PARAMS_INVALID)?;
        let public = bytes(public, public_len).ok_or(CKR_ARGUMENTS_BAD)?;
        let msg = bytes(input, in_len).ok_or(CKR_ARGUMENTS_BAD)?;
        let sig = bytes(sig, sig_len).ok_or(CKR_ARGUMENTS_BAD)?;
        algs::verify(alg, public, msg, ctx, sig).map(|()| CKR_OK)
    })()))
}

unsafe fn kem_mech(mech: *const CsDrvMech) -> algs::Result<()> {
    match mech.as_ref() {
        Some(m) if m.type_ == CKM_ML_KEM => Ok(()),
        _ => Err(CKR_MECHANISM_INVALID),
    }
}

unsafe extern "C" fn encapsulate(_session: *mut Session, mech: *const CsDrvMech, parameter_set: CkUlong,
                                 public: *const u8, public_len: usize, ct: *mut u8, ct_len: *mut usize,
                                 secret: *mut u8, secret_len: *mut usize) -> CkRv {
    guard(CKR_DEVICE_ERROR, || rv((|| {
        kem_mech(mech)?;
        let alg = Alg::kem(parameter_set).ok_or(CKR_DOMAIN_PARAMS_INVALID)?;
        let public = bytes(public, public_len).ok_or(CKR_ARGUMENTS_BAD)?;
        if ct_len.is_null() || secret_len.is_null() {
            return Err(CKR_ARGUMENTS_BAD);
        }
        if ct.is_null() || secret.is_null() || *ct_len < algs::output_len(alg) || *secret_len < 32 {
            *ct_len = algs::output_len(alg);
            *secret_len = 32;
            return Err(CKR_BUFFER_TOO_SMALL);
        }
        let (c, k) = algs::encapsulate(alg, public, None)?;
        copy_out(&c, ct, ct_len);
        Ok(copy_out(&k[..], secret, secret_len))
    })()))
}

unsafe extern "C" fn decapsulate(_session: *mut Session, key: *const CsDrvKey, mech: *const CsDrvMech,
                                 ct: *const u8, ct_len: usize, secret: *mut u8, secret_len: *mut usize) -> CkRv {
    guard(CKR_DEVICE_ERROR, || rv((|| {
        kem_mech(mech)?;
        let mat = key_material(key)?;
        if mat.alg.is_dsa() {
            return Err(CKR_KEY_TYPE_INCONSISTENT);
        }
        let ct = bytes(ct, ct_len).ok_or(CKR_ARGUMENTS_BAD)?;
        if secret_len.is_null() {
            return Err(CKR_ARGUMENTS_BAD);
        }
        if secret.is_null() || *secret_len < 32 {
            *secret_len = 32;
            return Err(CKR_BUFFER_TOO_SMALL);
        }
        let k = algs::decapsulate(&mat, ct)?;
        Ok(copy_out(&k[..], secret, secret_len))
    })()))
}

/// Casts one of the functions above to the table's `void (*)(void)`.
macro_rules! entry {
    ($id:expr, $f:expr, $t:ty) => {
        CsDispatch {
            id: $id,
            // SAFETY: the broker casts it back to the type cs_driver.h gives this id.
            fn_: Some(unsafe { core::mem::transmute::<$t, unsafe extern "C" fn()>($f) }),
        }
    };
}

type FnBoardOpen = unsafe extern "C" fn(*const c_char, *mut c_void, *const c_char, *mut *mut Board) -> c_int;
type FnBoardClose = unsafe extern "C" fn(*mut *mut Board);
type FnBoardMechs = unsafe extern "C" fn(*mut Board, *mut *mut CsMechInfo, *mut usize) -> c_int;
type FnBoardKeys = unsafe extern "C" fn(*mut Board, *mut *mut c_void, *mut usize) -> c_int;
type FnSessionOpen = unsafe extern "C" fn(*mut Board) -> *mut Session;
type FnSessionClose = unsafe extern "C" fn(*mut *mut Session);
type FnCaps = unsafe extern "C" fn(*mut Board, *mut CsCaps) -> c_int;
type FnSign = unsafe extern "C" fn(*mut Session, *const CsDrvKey, *const CsDrvMech, *const u8, usize, *mut u8,
                                   *mut usize) -> CkRv;
type FnGenerate = unsafe extern "C" fn(*mut Session, *const CsKeygen, *mut *mut u8, *mut usize) -> CkRv;
type FnPublic = unsafe extern "C" fn(*mut Session, *const CsDrvKey, *mut CkUlong, *mut CkUlong, *mut u8,
                                     *mut usize) -> CkRv;
type FnVerify = unsafe extern "C" fn(*mut Session, *const CsDrvMech, CkUlong, *const u8, usize, *const u8, usize,
                                     *const u8, usize) -> CkRv;
type FnEncaps = unsafe extern "C" fn(*mut Session, *const CsDrvMech, CkUlong, *const u8, usize, *mut u8, *mut usize,
                                     *mut u8, *mut usize) -> CkRv;
type FnDecaps = unsafe extern "C" fn(*mut Session, *const CsDrvKey, *const CsDrvMech, *const u8, usize, *mut u8,
                                     *mut usize) -> CkRv;

static DISPATCH: [CsDispatch; 14] = [
    entry!(CS_DRV_BOARD_OPEN, board_open, FnBoardOpen),
    entry!(CS_DRV_BOARD_CLOSE, board_close, FnBoardClose),
    entry!(CS_DRV_BOARD_MECHANISMS, board_mechanisms, FnBoardMechs),
    entry!(CS_DRV_BOARD_KEYS, board_keys, FnBoardKeys),
    entry!(CS_DRV_SESSION_OPEN, session_open, FnSessionOpen),
    entry!(CS_DRV_SESSION_CLOSE, session_close, FnSessionClose),
    entry!(CS_DRV_CAPABILITIES, capabilities, FnCaps),
    entry!(CS_DRV_SIGN_KEY, sign_key, FnSign),
    entry!(CS_DRV_GENERATE_MATERIAL, generate_material, FnGenerate),
    entry!(CS_DRV_PUBLIC_KEY, public_key, FnPublic),
    entry!(CS_DRV_VERIFY, verify, FnVerify),
    entry!(CS_DRV_ENCAPSULATE, encapsulate, FnEncaps),
    entry!(CS_DRV_DECAPSULATE, decapsulate, FnDecaps),
    CsDispatch { id: 0, fn_: None },
];

static DRIVER: CsDriver = CsDriver {
    abi_version: CS_DRIVER_ABI_VERSION,
    type_: c"pq".as_ptr(),
    description: c"ML-DSA (FIPS 204) and ML-KEM (FIPS 203) on the broker's cores (Rust, fips204/fips203)".as_ptr(),
    dispatch: DISPATCH.as_ptr(),
};

/// The one exported symbol (cs_driver.h CS_DRIVER_ENTRY_SYMBOL).
#[no_mangle]
pub extern "C" fn cs_driver_entry() -> *const CsDriver {
    &DRIVER
}
