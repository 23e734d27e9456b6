#!/usr/bin/env python3
"""objects_test.py -- certificates and data objects through PyKCS11 (issue #10).

usage: objects_test.py MODULE TOKEN PIN CERT_DER SERIAL_HEX

What pkcs11-tool cannot show: a certificate created from CKA_VALUE alone
gets CKA_SUBJECT, CKA_ISSUER, CKA_SERIAL_NUMBER and CKA_CHECK_VALUE from the
module (checked against the DER and against `openssl x509 -serial`, given
as SERIAL_HEX); the session and login rules of C_CreateObject
(CKR_USER_NOT_LOGGED_IN, CKR_SESSION_READ_ONLY); C_SetAttributeValue of
CKA_VALUE of a certificate is CKR_ATTRIBUTE_READ_ONLY while CKA_LABEL
changes and the change is seen by a new session; CKA_TRUSTED TRUE is
refused; session objects vanish with their session, private ones at logout;
C_DestroyObject of a token certificate.

Prints one line per check; exit status 0 when all passed, 1 otherwise.
"""

import hashlib
import sys

import PyKCS11
from PyKCS11 import (CKA_CERTIFICATE_TYPE, CKA_CHECK_VALUE, CKA_CLASS, CKA_ID, CKA_ISSUER, CKA_LABEL,
                     CKA_PRIVATE, CKA_SERIAL_NUMBER, CKA_SUBJECT, CKA_TOKEN, CKA_TRUSTED, CKA_VALUE,
                     CKC_X_509, CKF_RW_SESSION, CKF_SERIAL_SESSION, CKO_CERTIFICATE, CKO_DATA, CK_FALSE,
                     CK_TRUE)


class CheckFailed(Exception):
    pass


def log(msg):
    print("[objects_test] " + msg, flush=True)


def check(cond, what):
    if not cond:
        raise CheckFailed(what)


def expect_rv(rv, what, func, *args):
    try:
        func(*args)
    except PyKCS11.PyKCS11Error as e:
        check(e.value == rv, "%s: %s, not %s" % (what, PyKCS11.CKR[e.value], PyKCS11.CKR[rv]))
        log("%s: %s" % (what, PyKCS11.CKR[rv]))
        return
    raise CheckFailed("%s: succeeded" % what)


def attr(session, obj, kind):
    return bytes(session.getAttributeValue(obj, [kind], allAsBinary=True)[0])


def der_items(der):
    """The (tag, whole TLV) items of one DER SEQUENCE's contents."""
    def tlv(buf, i):
        tag, n = buf[i], buf[i + 1]
        if n < 0x80:
            return tag, i + 2, n
        k = n & 0x7f
        return tag, i + 2 + k, int.from_bytes(buf[i + 2:i + 2 + k], "big")
    _, start, length = tlv(der, 0)
    items, i = [], start
    while i < start + length:
        tag, body, n = tlv(der, i)
        items.append((tag, der[i:body + n]))
        i = body + n
    return items


def main():
    module, token, pin, cert_path, serial_hex = sys.argv[1:6]
    der = open(cert_path, "rb").read()
    # tbsCertificate: [0] version, serial, signature algorithm, issuer, validity, subject, ...
    tbs = der_items(der_items(der)[0][1])
    serial, issuer, subject = tbs[1][1], tbs[3][1], tbs[5][1]
    check(int.from_bytes(serial[2:], "big") == int(serial_hex, 16), "the test's own DER parsing disagrees with openssl")

    lib = PyKCS11.PyKCS11Lib()
    lib.load(module)
    slot = [s for s in lib.getSlotList(tokenPresent=True) if lib.getTokenInfo(s).label.strip() == token][0]
    ro = lib.openSession(slot, CKF_SERIAL_SESSION)
    rw = lib.openSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION)
    value_only = [(CKA_CLASS, CKO_CERTIFICATE), (CKA_CERTIFICATE_TYPE, CKC_X_509), (CKA_VALUE, der)]

    # Without login: no token objects; a session certificate is fine.
    expect_rv(PyKCS11.CKR_USER_NOT_LOGGED_IN, "token certificate without login", rw.createObject,
              value_only + [(CKA_TOKEN, CK_TRUE)])
    obj = ro.createObject(value_only + [(CKA_LABEL, "py-session")])
    check(attr(ro, obj, CKA_SUBJECT) == subject, "CKA_SUBJECT is not the certificate's subject")
    check(attr(ro, obj, CKA_ISSUER) == issuer, "CKA_ISSUER is not the certificate's issuer")
    check(attr(ro, obj, CKA_SERIAL_NUMBER) == serial, "CKA_SERIAL_NUMBER is not the certificate's serial")
    check(attr(ro, obj, CKA_CHECK_VALUE) == hashlib.sha1(der).digest()[:3], "CKA_CHECK_VALUE is not SHA-1[0:3]")
    check(attr(ro, obj, CKA_VALUE) == der, "CKA_VALUE changed")
    check(attr(ro, obj, CKA_TOKEN) == b"\x00", "a session certificate says CKA_TOKEN")
    log("session certificate from CKA_VALUE only: CKA_SUBJECT, CKA_ISSUER, CKA_SERIAL_NUMBER, "
        "CKA_CHECK_VALUE derived")
    expect_rv(PyKCS11.CKR_ATTRIBUTE_READ_ONLY, "C_SetAttributeValue CKA_VALUE of a session certificate",
              ro.setAttributeValue, obj, [(CKA_VALUE, der[:-1])])
    check(len(rw.findObjects([(CKA_LABEL, "py-session")])) == 1, "another session does not see the session object")
    ro.closeSession()
    check(len(rw.findObjects([(CKA_LABEL, "py-session")])) == 0, "the session object outlived its session")
    log("a session object is seen by the application's other sessions and goes with its session")

    rw.login(pin)
    ro = lib.openSession(slot, CKF_SERIAL_SESSION)
    expect_rv(PyKCS11.CKR_SESSION_READ_ONLY, "token certificate in a R/O session", ro.createObject,
              value_only + [(CKA_TOKEN, CK_TRUE)])
    expect_rv(PyKCS11.CKR_ATTRIBUTE_READ_ONLY, "CKA_TRUSTED TRUE", rw.createObject,
              value_only + [(CKA_TRUSTED, CK_TRUE)])
    expect_rv(PyKCS11.CKR_ATTRIBUTE_VALUE_INVALID, "CKA_VALUE that is not a certificate", rw.createObject,
              [(CKA_CLASS, CKO_CERTIFICATE), (CKA_CERTIFICATE_TYPE, CKC_X_509), (CKA_VALUE, b"\x30\x03\x02\x01\x01")])
    expect_rv(PyKCS11.CKR_TEMPLATE_INCOMPLETE, "certificate without CKA_CERTIFICATE_TYPE", rw.createObject,
              [(CKA_CLASS, CKO_CERTIFICATE), (CKA_VALUE, der)])

    tok = rw.createObject(value_only + [(CKA_TOKEN, CK_TRUE), (CKA_LABEL, "py-cert"), (CKA_ID, b"\x42")])
    found = ro.findObjects([(CKA_CLASS, CKO_CERTIFICATE), (CKA_ISSUER, issuer), (CKA_SERIAL_NUMBER, serial)])
    check(len(found) >= 1, "the token certificate is not found by issuer and serial")
    check(len(ro.findObjects([(CKA_SUBJECT, subject), (CKA_ID, b"\x42")])) == 1, "not found by subject and id")
    expect_rv(PyKCS11.CKR_ATTRIBUTE_READ_ONLY, "C_SetAttributeValue CKA_VALUE of a token certificate",
              rw.setAttributeValue, tok, [(CKA_VALUE, der[:-1])])
    expect_rv(PyKCS11.CKR_SESSION_READ_ONLY, "C_SetAttributeValue of a token object in a R/O session",
              ro.setAttributeValue, tok, [(CKA_LABEL, "nope")])
    rw.setAttributeValue(tok, [(CKA_LABEL, "py-renamed")])
    other = lib.openSession(slot, CKF_SERIAL_SESSION)
    renamed = other.findObjects([(CKA_LABEL, "py-renamed")])
    check(len(renamed) == 1 and attr(other, renamed[0], CKA_VALUE) == der, "the new label is not seen")
    check(len(other.findObjects([(CKA_LABEL, "py-cert")])) == 0, "the old label is still found")
    log("token certificate: found by issuer/serial and subject/id; label changed, value not")

    secret = rw.createObject([(CKA_CLASS, CKO_DATA), (CKA_PRIVATE, CK_TRUE), (CKA_LABEL, "py-private"),
                              (CKA_VALUE, b"session secret")])
    check(attr(rw, secret, CKA_VALUE) == b"session secret", "private session data object")
    public_data = rw.createObject([(CKA_CLASS, CKO_DATA), (CKA_PRIVATE, CK_FALSE), (CKA_LABEL, "py-public")])
    rw.logout()
    check(len(other.findObjects([(CKA_LABEL, "py-private")])) == 0, "a private session object outlived the login")
    check(len(other.findObjects([(CKA_LABEL, "py-public")])) == 1, "a public session object went at logout")
    rw.destroyObject(public_data)
    log("private session objects go at logout, public ones stay")

    rw.login(pin)
    expect_rv(PyKCS11.CKR_SESSION_READ_ONLY, "C_DestroyObject of a token object in a R/O session",
              ro.destroyObject, tok)
    rw.destroyObject(tok)
    check(len(other.findObjects([(CKA_LABEL, "py-renamed")])) == 0, "the destroyed certificate is still found")
    log("C_DestroyObject of the token certificate")
    rw.logout()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except CheckFailed as e:
        log("FAIL: %s" % e)
        sys.exit(1)
