//! ffi.rs — the shim driver ABI (shim-drivers/cs_driver.h, ABI version 2) as
//! Rust sees it: `#[repr(C)]` mirrors of its structures, its function ids and
//! capability bits, and the PKCS#11 values the driver uses (PKCS#11 3.0
//! pkcs11t.h; the 3.2 post-quantum ones as include/cryptoserver/pkcs11v.h
//! defines them).  Written by hand; the layouts are checked on both sides
//! (tests below and tests/unit/test_driver_pq.c) against the same sizes and
//! offsets for LP64.  Every type here must change together with the header.

use core::ffi::{c_char, c_int, c_uint, c_ulong, c_void};

pub type CkUlong = c_ulong;
pub type CkRv = c_ulong;

pub const CS_DRIVER_ABI_VERSION: c_uint = 2;

// Function ids (cs_driver.h, enum CS_DRV_*).  Never reuse or renumber.
pub const CS_DRV_BOARD_OPEN: c_int = 1;
pub const CS_DRV_BOARD_CLOSE: c_int = 2;
pub const CS_DRV_BOARD_MECHANISMS: c_int = 3;
pub const CS_DRV_BOARD_KEYS: c_int = 4;
pub const CS_DRV_SESSION_OPEN: c_int = 5;
pub const CS_DRV_SESSION_CLOSE: c_int = 6;
pub const CS_DRV_CAPABILITIES: c_int = 9;
pub const CS_DRV_SIGN_KEY: c_int = 10;
pub const CS_DRV_GENERATE_MATERIAL: c_int = 12;
pub const CS_DRV_PUBLIC_KEY: c_int = 19;
pub const CS_DRV_VERIFY: c_int = 20;
pub const CS_DRV_ENCAPSULATE: c_int = 21;
pub const CS_DRV_DECAPSULATE: c_int = 22;

// cs_caps_t bits.
pub const CS_KT_ML_DSA: c_uint = 0x8;
pub const CS_KT_ML_KEM: c_uint = 0x10;
pub const CS_CAP_KEY_MATERIAL: c_uint = 0x1;
pub const CS_CAP_GENERATE_MATERIAL: c_uint = 0x4;
pub const CS_CAP_KEM: c_uint = 0x20;
pub const CS_CAP_PUBLIC_OPS: c_uint = 0x40;

// PKCS#11 return values (3.0 pkcs11t.h).
pub const CKR_OK: CkRv = 0x000;
pub const CKR_ARGUMENTS_BAD: CkRv = 0x007;
pub const CKR_ATTRIBUTE_VALUE_INVALID: CkRv = 0x013;
pub const CKR_DEVICE_ERROR: CkRv = 0x030;
pub const CKR_ENCRYPTED_DATA_LEN_RANGE: CkRv = 0x041;
pub const CKR_HOST_MEMORY: CkRv = 0x002;
pub const CKR_KEY_HANDLE_INVALID: CkRv = 0x060;
pub const CKR_KEY_TYPE_INCONSISTENT: CkRv = 0x063;
pub const CKR_MECHANISM_INVALID: CkRv = 0x070;
pub const CKR_MECHANISM_PARAM_INVALID: CkRv = 0x071;
pub const CKR_SIGNATURE_INVALID: CkRv = 0x0C0;
pub const CKR_SIGNATURE_LEN_RANGE: CkRv = 0x0C1;
pub const CKR_DOMAIN_PARAMS_INVALID: CkRv = 0x130;
pub const CKR_BUFFER_TOO_SMALL: CkRv = 0x150;
pub const CKR_PUBLIC_KEY_INVALID: CkRv = 0x1C4;

// PKCS#11 3.2 values (include/cryptoserver/pkcs11v.h).
pub const CKK_ML_KEM: CkUlong = 0x49;
pub const CKK_ML_DSA: CkUlong = 0x4a;
pub const CKM_ML_KEM_KEY_PAIR_GEN: CkUlong = 0x0f;
pub const CKM_ML_KEM: CkUlong = 0x17;
pub const CKM_ML_DSA_KEY_PAIR_GEN: CkUlong = 0x1c;
pub const CKM_ML_DSA: CkUlong = 0x1d;
pub const CKH_HEDGE_PREFERRED: CkUlong = 0;
pub const CKH_HEDGE_REQUIRED: CkUlong = 1;
pub const CKH_DETERMINISTIC_REQUIRED: CkUlong = 2;
pub const CKF_SIGN: CkUlong = 0x800;
pub const CKF_VERIFY: CkUlong = 0x2000;
pub const CKF_GENERATE_KEY_PAIR: CkUlong = 0x10000;
pub const CKF_ENCAPSULATE: CkUlong = 0x1000_0000;
pub const CKF_DECAPSULATE: CkUlong = 0x2000_0000;

/// cs_drv_mech_t: a raw mechanism with its parameters.
#[repr(C)]
pub struct CsDrvMech {
    pub type_: CkUlong,
    pub hash: CkUlong,
    pub mgf: CkUlong,
    pub salt_len: CkUlong,
    pub label: *const u8,
    pub label_len: usize,
    pub hedge: CkUlong,
    pub context: *const u8,
    pub context_len: usize,
}

/// cs_mech_info_t: one mechanism of the board.
#[repr(C)]
pub struct CsMechInfo {
    pub type_: CkUlong,
    pub min_key_bits: CkUlong,
    pub max_key_bits: CkUlong,
    pub flags: CkUlong,
}

/// cs_drv_key_t: the key of one operation (resident id, or PKCS#8 material).
#[repr(C)]
pub struct CsDrvKey {
    pub id: *const u8,
    pub id_len: usize,
    pub pkcs8: *const u8,
    pub pkcs8_len: usize,
    pub ref_: *const c_char,
}

/// cs_caps_t: what the board can do.
#[repr(C)]
pub struct CsCaps {
    pub flags: c_uint,
    pub material_types: c_uint,
    pub generate_types: c_uint,
}

/// cs_keygen_t: a key pair to generate.
#[repr(C)]
pub struct CsKeygen {
    pub mechanism: CkUlong,
    pub modulus_bits: CkUlong,
    pub public_exponent: *const u8,
    pub public_exponent_len: usize,
    pub ec_params: *const u8,
    pub ec_params_len: usize,
    pub id: *const u8,
    pub id_len: usize,
    pub label: *const c_char,
    pub can_sign: bool,
    pub can_decrypt: bool,
    pub parameter_set: CkUlong,
}

/// cs_driver_fn_t: a function of the table, cast to `void (*)(void)`.
pub type CsDriverFn = Option<unsafe extern "C" fn()>;

/// cs_driver_dispatch_t: `{ id, fn }`; `{ 0, NULL }` ends the table.
#[repr(C)]
pub struct CsDispatch {
    pub id: c_int,
    pub fn_: CsDriverFn,
}

/// cs_driver_t: what cs_driver_entry() returns.
#[repr(C)]
pub struct CsDriver {
    pub abi_version: c_uint,
    pub type_: *const c_char,
    pub description: *const c_char,
    pub dispatch: *const CsDispatch,
}

// The table and the descriptor are immutable statics holding pointers to
// other statics: safe to share between threads.
unsafe impl Sync for CsDriver {}
unsafe impl Sync for CsDispatch {}

extern "C" {
    pub fn malloc(size: usize) -> *mut c_void;
    pub fn free(ptr: *mut c_void);
}

#[link(name = "czmq")]
extern "C" {
    /// CZMQ's logger (zsys(3)): the broker's log, as the C drivers use it.
    pub fn zsys_error(format: *const c_char, ...);
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::{offset_of, size_of};

    // The same numbers are asserted with sizeof/offsetof on the C side
    // (tests/unit/test_driver_pq.c, test "layout"), LP64.
    #[test]
    fn layouts_match_cs_driver_h() {
        assert_eq!(size_of::<CsDrvMech>(), 72);
        assert_eq!(offset_of!(CsDrvMech, hedge), 48);
        assert_eq!(offset_of!(CsDrvMech, context), 56);
        assert_eq!(offset_of!(CsDrvMech, context_len), 64);
        assert_eq!(size_of::<CsMechInfo>(), 32);
        assert_eq!(size_of::<CsDrvKey>(), 40);
        assert_eq!(offset_of!(CsDrvKey, ref_), 32);
        assert_eq!(size_of::<CsCaps>(), 12);
        assert_eq!(size_of::<CsKeygen>(), 88);
        assert_eq!(offset_of!(CsKeygen, can_sign), 72);
        assert_eq!(offset_of!(CsKeygen, can_decrypt), 73);
        assert_eq!(offset_of!(CsKeygen, parameter_set), 80);
        assert_eq!(size_of::<CsDispatch>(), 16);
        assert_eq!(size_of::<CsDriver>(), 32);
    }
}
