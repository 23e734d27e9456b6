-- keystore-v1.sql: a schema 1 keystore (issue #3 format, before row MACs,
-- PIN epochs and keyed PIN hashes), made by the code of commit a9fb1c0 and
-- dumped with `sqlite3 keystore.db .dump`.  tests/unit/test_keystore.c
-- (test_upgrade_from_schema_1) loads it and opens it with the new code.
-- Master key: bytes i * 7 + 1 for i = 0..31 (the test's s_master).
-- Tenants: alice (user PIN 1234, SO PIN 123456) with one P-256 key
-- "old-ec" (ks:fc6748718455138a690dddbd54a54c57, private part sealed under
-- that master key); bob (user PIN 5678, SO PIN 567890) with one wrong user
-- PIN counted.  A test key of no value: never use it for anything else.
PRAGMA foreign_keys=OFF;
BEGIN TRANSACTION;
CREATE TABLE meta (  name TEXT PRIMARY KEY, value BLOB NOT NULL);
INSERT INTO meta VALUES('schema',X'31');
INSERT INTO meta VALUES('version_seq',3);
INSERT INTO meta VALUES('master_check',X'40a16f1119e96ad9f6a5d3d520ed6e33e90eda4b05fe4aa7661edb03f5777c9b93e252075dda93b48c090c1806c8d97dc6a6b40d9dee7ec7e146ee8b3e55ca461d43a6e46d29fa35');
CREATE TABLE tenants (  name TEXT PRIMARY KEY,  user_pin TEXT NOT NULL, so_pin TEXT NOT NULL,  user_failures INTEGER NOT NULL DEFAULT 0,  so_failures INTEGER NOT NULL DEFAULT 0,  keys_version INTEGER NOT NULL);
INSERT INTO tenants VALUES('alice','pbkdf2-sha256$100000$71e52b39b2b882c58a6cbf24b8ae5b6b$3fa02d0b57a1c3d57a24656f116f615c8ad1134591bad859bbc4bf96dab887bd','pbkdf2-sha256$100000$7938857edb8a9ef6f5f746fa31865065$4f3b3b969e683d0cb5d0c97da3170e360ccd37e613dec0d5a7588f949686291f',0,0,3);
INSERT INTO tenants VALUES('bob','pbkdf2-sha256$100000$0d9fd968ed5a2ddcf787959d0bb221a6$4ef3f09a4c2194b788fd5a12102f277c48c09b05bf1a8d8cc61df4817288c587','pbkdf2-sha256$100000$0cec306382da8826666ca4cbcfef710b$cabf922edb646e5a9e6ebcae2b0ee033ff27c21c009c58b6cd7252d2c8565eca',1,0,2);
CREATE TABLE keys (  tenant TEXT NOT NULL REFERENCES tenants (name) ON DELETE CASCADE,  ref TEXT NOT NULL,  info BLOB NOT NULL,  private BLOB,  PRIMARY KEY (tenant, ref));
INSERT INTO keys VALUES('alice','ks:fc6748718455138a690dddbd54a54c57',X'0a1471bc2764b3d3fc3f136445a1ea5ce0dc2eb2b50b12066f6c642d656318032080023a0a06082a8648ce3d0301074243044104f63aefa6c0becd16e37000f9fa77718e5879063189e4746fe75cc58e1ccc1d4b39e10f8ccc3ae10e5a0578d0c02702115b12f1e0fb796a1891351980b711262f480162236b733a6663363734383731383435353133386136393064646462643534613534633537680170017a0508830210017a0508e20210007a0508e50210017a0508e40210017a0508e30210017a0608e60218c02082010508e302100182010608e60218c0208a01086b657973746f7265',X'aee7a66607b55afda9aae706dfcb3a03276dc70fda92d8bcae511b0e6d4d3bdfe00a4377ec4194f01205a2ada1b31967c2feee71e7cf60cc4da21a36c2f974b39a0238d3d7bbbff8d869d0123c224bd83f566f0141540afab9ad74ddbe79a4888299d09330fb3d7ef81ec42719dcf2e4f157c366d7200e9880ab3338ea0e01f184d2f21942823c4117b66922ff57f395a8ec7d7b811910a329472b34e1508a3e8721dca8f8a3');
COMMIT;
