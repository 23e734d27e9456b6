#!/usr/bin/env python3
"""keys-lib.py — helpers of the keystore integration tests (tests/integration/keys-*.sh).

  keys-lib.py ec-pem EC_PARAMS_HEX EC_POINT_HEX OUT.pem
                                     writes the PEM public key of a CKA_EC_PARAMS
                                     (DER OID) and CKA_EC_POINT (DER OCTET STRING)
                                     pair as printed by pkcs11-tool -O (pkcs11-tool
                                     0.23 --read-object fails on points whose X has
                                     leading zero bytes).
  keys-lib.py scan KEY.pem FILE...   exit 1 when a FILE holds any 16-byte window of
                                     the private numbers of KEY.pem (RSA d, p, q, dP,
                                     dQ, qInv; EC/Ed25519 private scalar), else 0.
                                     Missing files are skipped.

The private numbers come from `openssl pkey -text -noout` (no third-party
Python modules).  A self-check makes sure the scanner finds a window that is
there, so a broken parser cannot pass silently.
"""
import os
import re
import subprocess
import sys
import tempfile

WINDOW = 16
PRIVATE_FIELDS = ("privateExponent", "prime1", "prime2", "exponent1", "exponent2",
                  "coefficient", "priv")


def private_numbers(pem):
    """Returns the private numbers of the key in `pem` as a list of bytes (big-endian,
    without the sign byte openssl prints)."""
    text = subprocess.run(["openssl", "pkey", "-in", pem, "-text", "-noout"],
                          check=True, capture_output=True, text=True).stdout
    numbers, current, digits = [], None, []
    for line in text.splitlines():
        header = re.match(r"^([A-Za-z0-9]+):\s*(.*)$", line)
        if header:
            if current in PRIVATE_FIELDS and digits:
                numbers.append(bytes.fromhex("".join(digits)))
            current, digits = header.group(1), []
            continue
        if re.match(r"^\s+[0-9a-f]{2}(:[0-9a-f]{2})*:?\s*$", line):
            digits.extend(d for d in line.strip().split(":") if d)
    if current in PRIVATE_FIELDS and digits:
        numbers.append(bytes.fromhex("".join(digits)))
    numbers = [n.lstrip(b"\0") for n in numbers]
    return [n for n in numbers if len(n) >= WINDOW]


def has_window(data, secret):
    return any(secret[i:i + WINDOW] in data for i in range(len(secret) - WINDOW + 1))


def scan(pem, files):
    numbers = private_numbers(pem)
    if not numbers:
        print(f"keys-lib: no private numbers parsed from {pem}", file=sys.stderr)
        return 2
    with tempfile.NamedTemporaryFile() as probe:          # self-check of the scanner
        probe.write(b"x" * 100 + numbers[0][3:3 + WINDOW + 5] + b"y" * 100)
        probe.flush()
        if not has_window(open(probe.name, "rb").read(), numbers[0]):
            print("keys-lib: scanner self-check failed", file=sys.stderr)
            return 2
    found = False
    for name in files:
        if not os.path.exists(name):
            continue
        data = open(name, "rb").read()
        for number in numbers:
            if has_window(data, number):
                print(f"keys-lib: {name} holds a {WINDOW}-byte window of a private number "
                      f"of {pem}", file=sys.stderr)
                found = True
    if not found:
        print(f"keys-lib: {len(numbers)} private numbers of {pem}: no window in "
              + ", ".join(f for f in files if os.path.exists(f)))
    return 1 if found else 0


def der_len(n):
    if n < 128:
        return bytes([n])
    body = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(body)]) + body


def der(tag, body):
    return bytes([tag]) + der_len(len(body)) + body


def ec_pem(params_hex, point_hex, out):
    """SubjectPublicKeyInfo (RFC 5480 §2) of an EC key, written as PEM via openssl."""
    params, point = bytes.fromhex(params_hex), bytes.fromhex(point_hex)
    if point[0] == 0x04 and len(point) > 2 and point[1] == len(point) - 2:
        point = point[2:]                       # unwrap the DER OCTET STRING
    ec_public_key = bytes.fromhex("06072a8648ce3d0201")     # 1.2.840.10045.2.1
    spki = der(0x30, der(0x30, ec_public_key + params) + der(0x03, b"\0" + point))
    subprocess.run(["openssl", "pkey", "-pubin", "-inform", "DER", "-out", out],
                   input=spki, check=True)
    return 0


def main(argv):
    if len(argv) >= 3 and argv[0] == "scan":
        return scan(argv[1], argv[2:])
    if len(argv) == 4 and argv[0] == "ec-pem":
        return ec_pem(argv[1], argv[2], argv[3])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
