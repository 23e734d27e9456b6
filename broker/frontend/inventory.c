/*  inventory.c — what the boards offer, built once at start: the union of
 *  their mechanisms (Hello), the resident board keys of each tenant
 *  (ListKeys and "board:" routing), their registration with the
 *  scheduler; and the jobs answered from it: Hello and ListKeys (the
 *  keystore rows come from the slow pool).
 *
 *  Owns: fe_inventory_t (private here), frontend_t.rsa_range, the
 *  scheduler's boards, keys and workers.
 *  It also answers which boards may run what for a tenant
 *  (fe_open_boards, fe_boards_that, fe_board_index), read by the job
 *  rooms above it.
 *
 *  May call: board.h, scheduler.h, slow_link.c (fe_slow_new, fe_slow_go),
 *  reply.c (the release when a key list is back).  */
#include "cs_pin.h"
#include "cs_util.h"
#include "frontend_int.h"

/*  What the boards offer, built once at start (fe_build_mechs,
 *  fe_build_routing); read-only afterwards.  */
struct _fe_inventory_t {
    Cs__MechanismInfo *mechs;       /* Hello: union over boards */
    Cs__MechanismInfo **mech_ptrs;
    size_t n_mechs;
    fe_board_key_t *board_keys;     /* ListKeys: resident keys, one per (tenant, CKA_ID) */
    size_t n_board_keys;
    Cs__Attribute resident_attrs [8];   /* their private object's flags */
    Cs__Attribute *resident_attr_ptrs [8];
    size_t n_resident_attrs;
};

/*  The resident key "board:<hex CKA_ID>" as listed to tenant, or NULL: a
 *  key on one of the tenant's boards, neither a keystore key kept there
 *  (its board label is a "ks:" ref of some tenant) nor a key the broker
 *  reserved (the master key's wrapping key).  Any other ref, whatever it
 *  names, is unknown to the tenant (issue #7).  id gets the CKA_ID
 *  (*id_len_p bytes).  */
const fe_board_key_t *
fe_board_key_find (frontend_t *self, const char *tenant, const char *ref, unsigned char id [CS_KEY_ID_MAX],
                  size_t *id_len_p)
{
    long len = strncmp (ref, "board:", 6) == 0 ? cs_hex_decode (ref + 6, id, CS_KEY_ID_MAX) : -1;
    for (size_t i = 0; len > 0 && i < self->inventory->n_board_keys; i++) {
        const fe_board_key_t *key = &self->inventory->board_keys [i];
        if (streq (key->tenant, tenant) && key->info.id.len == (size_t) len
        &&  memcmp (key->info.id.data, id, (size_t) len) == 0) {
            *id_len_p = (size_t) len;
            return key;
        }
    }
    return NULL;
}

void
fe_job_hello (frontend_t *self, fe_request_t *request, size_t index)
{
    fe_slot_t *slot = &request->slots [index];
    Cs__HelloResult *hello = &slot->hello;
    cs__hello_result__init (hello);
    hello->version = request->version;
    hello->token_label = request->tenant;
    hello->manufacturer = (char *) "cryptoserver";
    hello->model = (char *) "broker";
    hello->serial = self->serial;
    hello->n_mechanisms = self->inventory->n_mechs;
    hello->mechanisms = self->inventory->mech_ptrs;
    hello->boards = (uint32_t) self->args->n_boards;
    hello->min_pin_len = CS_PIN_MIN_LEN;
    hello->max_pin_len = CS_PIN_MAX_LEN;
    hello->token_flags = request->has_state ? keystore_tenant_flags (&request->tenant_state) : 0;
    hello->rsa_min_bits = (uint32_t) self->config->rsa_min_bits;
    hello->usage_separation = (uint32_t) broker_config_usage (self->config, request->tenant);
    slot->result.rv = CKR_OK;
    slot->result.kind_case = CS__RESULT__KIND_HELLO;
    slot->result.hello = hello;
}

/*  A 32-bit FNV-1a over the CKA_IDs of the tenant's resident board keys: the
 *  board inventory part of ListKeysResult.version.  */
static uint32_t
s_inventory_hash (frontend_t *self, const char *tenant)
{
    uint32_t hash = 0;
    for (size_t i = 0; i < self->inventory->n_board_keys; i++) {
        if (!streq (self->inventory->board_keys [i].tenant, tenant))
            continue;
        if (hash == 0)
            hash = 2166136261u;
        const Cs__KeyInfo *key = &self->inventory->board_keys [i].info;
        for (size_t k = 0; k < key->id.len; k++)
            hash = (hash ^ key->id.data [k]) * 16777619u;
        hash = (hash ^ key->boards) * 16777619u;
    }
    return hash;
}

/*  The CKA_PRIVATE flag among attrs, or dflt.  */
static bool
s_private_flag (Cs__Attribute **attrs, size_t n, bool dflt)
{
    for (size_t i = 0; i < n; i++)
        if (attrs [i]->type == CKA_PRIVATE && attrs [i]->value_case == CS__ATTRIBUTE__VALUE_FLAG)
            return attrs [i]->flag;
    return dflt;
}

/*  Without a CKU_USER ticket a key list holds public objects only (issue
 *  #7; PKCS#11 2.40 §4.4: objects with CKA_PRIVATE TRUE need a login): the
 *  public key objects whose CKA_PRIVATE is FALSE (a public key's default),
 *  and never a private key object, whatever its CKA_PRIVATE (every job with
 *  a private key needs the login anyway).  Rewrites keys->keys to shallow
 *  copies in slot->public_view without their private half; the originals
 *  stay with their owners.  Returns 0 or -1 (out of memory).  */
static int
s_list_public_view (fe_slot_t *slot, Cs__ListKeysResult *keys)
{
    slot->public_view = calloc (keys->n_keys + 1, sizeof (Cs__KeyInfo));
    if (!slot->public_view)
        return -1;
    size_t n = 0;
    for (size_t i = 0; i < keys->n_keys; i++) {
        const Cs__KeyInfo *key = keys->keys [i];
        if (!key->has_public || s_private_flag (key->public_attributes, key->n_public_attributes, false))
            continue;
        Cs__KeyInfo *copy = &slot->public_view [n];
        *copy = *key;
        copy->has_private = false;
        copy->n_private_attributes = 0;
        copy->private_attributes = NULL;
        keys->keys [n++] = copy;
    }
    keys->n_keys = n;
    return 0;
}

/* ---- which boards (read by the job rooms) ---------------------------- */

uint64_t
fe_open_boards (frontend_t *self, const char *tenant)
{
    uint64_t set = 0;
    for (size_t b = 0; b < self->args->n_boards; b++) {
        const char *owner = self->args->boards [b]->tenant;
        if (!owner || (tenant && streq (owner, tenant)))
            set |= UINT64_C (1) << b;
    }
    return set;
}

//  Whether board can do `what` with `type` (and `flag`), its capability
//  query of board.h.
static bool
s_board_can (const board_t *board, fe_can_t what, unsigned long type, CK_FLAGS flag)
{
    switch (what) {
        case FE_CAN_GENERATE:           return board_generates (board, type, false);
        case FE_CAN_TAKE_MATERIAL:      return board_takes_material (board, type);
        case FE_CAN_DERIVE_RESIDENT:    return board_derives (board, false, type);
        case FE_CAN_DERIVE_MATERIAL:    return board_derives (board, true, type);
        case FE_CAN_RUN:                return board_runs (board, type, flag);
        case FE_CAN_MODEXP:             return board_modexps (board);
    }
    return false;
}

uint64_t
fe_boards_that (frontend_t *self, fe_can_t what, unsigned long type, CK_FLAGS flag, const char *tenant)
{
    uint64_t set = 0;
    for (size_t b = 0; b < self->args->n_boards; b++)
        if (s_board_can (self->args->boards [b], what, type, flag))
            set |= UINT64_C (1) << b;
    //  Only what takes the tenant's key material or operands is narrowed to its boards:
    //  a resident key or a mechanism alone says nothing about the tenant.
    bool material = what == FE_CAN_GENERATE || what == FE_CAN_TAKE_MATERIAL || what == FE_CAN_DERIVE_MATERIAL
                 || what == FE_CAN_MODEXP;
    return material ? set & fe_open_boards (self, tenant) : set;
}

/*  Index of the board called name, or -1.  */
int
fe_board_index (frontend_t *self, const char *name)
{
    for (size_t b = 0; b < self->args->n_boards; b++)
        if (streq (self->args->boards [b]->name, name))
            return (int) b;
    return -1;
}

/* ---- Hello and ListKeys ------------------------------------------------ */

/*  ListKeys: the tenant's keystore rows and the resident keys of its
 *  boards, only their public objects without a login (s_list_public_view,
 *  a list of its own version: the top bit flipped); "unchanged" when the
 *  client's version is current.  */
static uint64_t
s_list_version (frontend_t *self, fe_request_t *request, uint64_t keys_version)
{
    uint64_t version = ((uint64_t) s_inventory_hash (self, request->tenant) << 32)
                     | (keys_version & 0xffffffffu);
    return request->ticket_ok ? version : version ^ (UINT64_C (1) << 63);
}

static void s_list_keys_result (frontend_t *self, fe_request_t *request, fe_slot_t *slot, slow_job_t *list);

/*  SLOW_LIST_KEYS is back (its completion): the list, then the request's
 *  count of it (fe_slow_go).  */
static void
s_list_keys_back (void *arg, slow_job_t *list)
{
    frontend_t *self = arg;
    fe_request_t *request = list->request;
    s_list_keys_result (self, request, &request->slots [list->index], list);
    fe_request_release (self, request, true);
}

/*  ListKeys (see s_list_version): answered here when the client's version
 *  is current (the tenant's keys_version from its row), else the rows are
 *  read in the slow pool (s_list_keys_back).  A paged list
 *  (ListKeysJob.page_size > 0, docs/CONTRACTS.md "Key lists in pages")
 *  reads at most min (page_size, broker/max-list-page) rows after the
 *  job's cursor; only its first page (no cursor) may be "unchanged".  */
void
fe_job_list_keys (frontend_t *self, fe_request_t *request, size_t index)
{
    const Cs__ListKeysJob *job = request->req->jobs [index]->list_keys;
    fe_slot_t *slot = &request->slots [index];
    Cs__ListKeysResult *keys = &slot->keys;
    uint64_t version = s_list_version (self, request, request->has_state ? request->tenant_state.keys_version
                                                                         : 0);
    /*  A ticket that is no longer valid (expired, revoked, forged) has
        ended the login before this (FE_NEEDS_PUBLIC, job_kinds.c), rather
        than answer with the public view as if the client had never logged
        in (docs/CONTRACTS.md "Login tickets").  */
    cs__list_keys_result__init (keys);
    keys->version = version;
    slot->result.kind_case = CS__RESULT__KIND_KEYS;
    slot->result.keys = keys;
    slot->result.rv = CKR_OK;
    if (job->known_version && job->known_version == version && !*job->after) {
        keys->unchanged = true;
        return;
    }
    slow_job_t *list = fe_slow_new (self, request, slot->item.index, SLOW_LIST_KEYS, s_list_keys_back);
    if (list)
        list->page = job->page_size < (uint32_t) self->config->max_list_page ? job->page_size
                   : (size_t) self->config->max_list_page;
    slot->result.rv = list ? fe_slow_go (self, list) : CKR_HOST_MEMORY;
}

/*  The tenant's keystore rows are back (at the keys_version read just
 *  before them): the list is them and, on its first page, the resident
 *  keys of its boards; a paged list says whether more follow.  */
static void
s_list_keys_result (frontend_t *self, fe_request_t *request, fe_slot_t *slot, slow_job_t *list)
{
    Cs__ListKeysResult *keys = &slot->keys;
    bool first = !list->page || !*list->job->list_keys->after;
    slot->listed = list->listed;
    slot->n_listed = list->n_listed;
    slot->next = list->next;
    list->listed = NULL;
    list->n_listed = 0;
    list->next = NULL;
    keys->version = s_list_version (self, request, list->keys_version);
    keys->more = slot->next != NULL;
    if (slot->next)
        keys->next = slot->next;
    slot->result.rv = list->rc ? CKR_DEVICE_ERROR : CKR_OK;
    if (list->rc)
        return;
    keys->keys = calloc (slot->n_listed + self->inventory->n_board_keys + 1, sizeof (Cs__KeyInfo *));
    if (!keys->keys) {
        slot->result.rv = CKR_HOST_MEMORY;
        return;
    }
    for (size_t i = 0; first && i < self->inventory->n_board_keys; i++)
        if (streq (self->inventory->board_keys [i].tenant, request->tenant))
            keys->keys [keys->n_keys++] = &self->inventory->board_keys [i].info;
    for (size_t i = 0; i < slot->n_listed; i++)
        keys->keys [keys->n_keys++] = slot->listed [i];
    if (!request->ticket_ok && s_list_public_view (slot, keys)) {
        keys->n_keys = 0;
        slot->result.rv = CKR_HOST_MEMORY;
    }
}

/*  Merges every board's mechanisms into one list for Hello.  */
int
fe_build_mechs (frontend_t *self)
{
    if (!self->inventory && !(self->inventory = calloc (1, sizeof *self->inventory)))
        return -1;
    size_t max = 0;
    for (size_t b = 0; b < self->args->n_boards; b++)
        max += self->args->boards [b]->n_mechs;
    self->inventory->mechs = calloc (max + 1, sizeof (Cs__MechanismInfo));
    self->inventory->mech_ptrs = calloc (max + 1, sizeof (Cs__MechanismInfo *));
    if (!self->inventory->mechs || !self->inventory->mech_ptrs)
        return -1;
    for (size_t b = 0; b < self->args->n_boards; b++)
        for (size_t m = 0; m < self->args->boards [b]->n_mechs; m++) {
            const cs_mech_info_t *info = &self->args->boards [b]->mechs [m];
            size_t i = 0;
            while (i < self->inventory->n_mechs && self->inventory->mechs [i].type != info->type)
                i++;
            Cs__MechanismInfo *out = &self->inventory->mechs [i];
            if (i == self->inventory->n_mechs) {
                cs__mechanism_info__init (out);
                out->type = info->type;
                out->min_key_bits = (uint32_t) info->min_key_bits;
                out->max_key_bits = (uint32_t) info->max_key_bits;
                out->flags = info->flags;
                self->inventory->mech_ptrs [self->inventory->n_mechs++] = out;
                continue;
            }
            if (info->min_key_bits < out->min_key_bits)
                out->min_key_bits = (uint32_t) info->min_key_bits;
            if (info->max_key_bits > out->max_key_bits)
                out->max_key_bits = (uint32_t) info->max_key_bits;
            out->flags |= info->flags;
        }
    self->rsa_range.policy_min = (CK_ULONG) self->config->rsa_min_bits;
    for (size_t i = 0; i < self->inventory->n_mechs; i++)
        if (self->inventory->mechs [i].type == CKM_RSA_PKCS_KEY_PAIR_GEN) {
            self->rsa_range.board_min = self->inventory->mechs [i].min_key_bits;
            self->rsa_range.board_max = self->inventory->mechs [i].max_key_bits;
        }
    return 0;
}

/*  Adds key k of board b (with a tenant) to the ListKeys union of that
 *  tenant, counting boards; returns true when it is listed (and so
 *  routable).  Keys generated for keystore rows (their board label is the
 *  "ks:" ref, of any tenant) are listed and routed through their rows
 *  instead, and reserved keys (board_key_reserve) not at all.  */
static bool
s_key_merge (frontend_t *self, size_t b, size_t k)
{
    board_t *board = self->args->boards [b];
    const cs_key_info_t *key = &board->keys [k];
    if (!board->tenant || (key->label && strncmp (key->label, "ks:", 3) == 0)
    ||  board_id_reserved (board, key->id, key->id_len))
        return false;
    for (size_t i = 0; i < self->inventory->n_board_keys; i++) {
        fe_board_key_t *known = &self->inventory->board_keys [i];
        if (streq (known->tenant, board->tenant) && known->info.id.len == key->id_len
        &&  !memcmp (known->info.id.data, key->id, key->id_len)) {
            if (!(known->boards & (UINT64_C (1) << b)))
                known->info.boards++;
            known->boards |= UINT64_C (1) << b;
            return true;
        }
    }
    fe_board_key_t *entry = &self->inventory->board_keys [self->inventory->n_board_keys];
    Cs__KeyInfo *out = &entry->info;
    char hex [2 * CS_KEY_ID_MAX + 1];
    cs_hex_encode (key->id, key->id_len, hex);
    cs__key_info__init (out);
    entry->tenant = board->tenant;
    entry->boards = UINT64_C (1) << b;
    out->id = (ProtobufCBinaryData) { key->id_len, (uint8_t *) key->id };
    out->label = key->label ? key->label : (char *) "";
    out->key_type = key->key_type;
    out->bits = (uint32_t) key->bits;
    out->modulus = (ProtobufCBinaryData) { key->modulus_len, key->modulus };
    out->public_exponent = (ProtobufCBinaryData) { key->public_exponent_len, key->public_exponent };
    out->ec_params = (ProtobufCBinaryData) { key->ec_params_len, key->ec_params };
    out->ec_point = (ProtobufCBinaryData) { key->ec_point_len, key->ec_point };
    out->can_sign = key->can_sign;
    out->can_decrypt = key->can_decrypt;
    out->boards = 1;
    out->has_private = true;
    out->has_public = true;
    if (asprintf (&out->ref, "board:%s", hex) < 0)
        out->ref = NULL;
    if (asprintf (&out->home, "board:%s", board->name) < 0)
        out->home = NULL;
    out->n_private_attributes = self->inventory->n_resident_attrs
                              - (key->can_derive && board_derives (board, false, CKK_EC) ? 0 : 1);
    out->private_attributes = self->inventory->resident_attr_ptrs;
    if (!out->ref || !out->home) {
        free (out->ref);
        free (out->home);
        return false;
    }
    self->inventory->n_board_keys++;
    return true;
}

/*  What a resident board key's private object says about itself.  */
static void
s_resident_attrs (frontend_t *self)
{
    static const struct { CK_ATTRIBUTE_TYPE type; bool value; } flags [] = {
        { CKA_SENSITIVE, true }, { CKA_EXTRACTABLE, false }, { CKA_PRIVATE, true },
        { CKA_MODIFIABLE, false }, { CKA_DESTROYABLE, false }, { CKA_COPYABLE, false },
        { CKA_DERIVE, true },       /* last: only for keys whose board derives with them */
    };
    for (size_t i = 0; i < sizeof flags / sizeof flags [0]; i++) {
        Cs__Attribute *attr = &self->inventory->resident_attrs [i];
        cs__attribute__init (attr);
        attr->type = flags [i].type;
        attr->value_case = CS__ATTRIBUTE__VALUE_FLAG;
        attr->flag = flags [i].value;
        self->inventory->resident_attr_ptrs [i] = attr;
    }
    self->inventory->n_resident_attrs = sizeof flags / sizeof flags [0];
}

/*  One line naming the host boards and the cores they share.  */
static void
s_log_host_boards (frontend_t *self)
{
    char names [512] = "";
    size_t used = 0;
    for (size_t b = 0; b < self->args->n_boards && used < sizeof names; b++)
        if (self->args->boards [b]->host)
            used += (size_t) snprintf (names + used, sizeof names - used, "%s%s", used ? ", " : "",
                                       self->args->boards [b]->name);
    if (*names && self->config->host_cores > 0)
        zsys_info ("placement: host boards %s share %d cores (broker/host-cores)", names,
                   self->config->host_cores);
}

/*  Registers boards, their keys and workers with the scheduler and builds
 *  the ListKeys entries of resident keys (pointing into the boards' arrays).  */
int
fe_build_routing (frontend_t *self)
{
    size_t max = 0;
    for (size_t b = 0; b < self->args->n_boards; b++)
        max += self->args->boards [b]->n_keys;
    self->inventory->board_keys = calloc (max + 1, sizeof (fe_board_key_t));
    if (!self->inventory->board_keys || !(self->scheduler = scheduler_new ()))
        return -1;
    scheduler_host_cores (self->scheduler, (size_t) self->config->host_cores);
    scheduler_lane_share (self->scheduler, !self->args->one_tenant);
    s_resident_attrs (self);
    zconfig_t *weights = self->config->tenant_weights;
    for (zconfig_t *w = weights ? zconfig_child (weights) : NULL; w; w = zconfig_next (w))
        if (scheduler_tenant_weight (self->scheduler, zconfig_name (w), (unsigned) atoi (zconfig_value (w))))
            return -1;
    for (size_t b = 0; b < self->args->n_boards; b++) {
        board_t *board = self->args->boards [b];
        if (scheduler_board_add (self->scheduler, board->name) != (int) b
        ||  scheduler_board_host (self->scheduler, b, board->host))
            return -1;
        for (size_t k = 0; k < board->n_keys; k++)
            if (s_key_merge (self, b, k))
                scheduler_key_add (self->scheduler, b, board->keys [k].id, board->keys [k].id_len);
        for (int t = 0; t < board->threads; t++)
            if (scheduler_worker_add (self->scheduler, b) != (int) self->n_workers++)
                return -1;
    }
    s_log_host_boards (self);
    return 0;
}

/*  Frees the inventory (the board keys' strings; the rest points into the
 *  boards).  */
void
fe_inventory_free (frontend_t *self)
{
    fe_inventory_t *inv = self->inventory;
    if (!inv)
        return;
    free (inv->mechs);
    free (inv->mech_ptrs);
    for (size_t i = 0; i < inv->n_board_keys; i++) {
        free (inv->board_keys [i].info.ref);
        free (inv->board_keys [i].info.home);
    }
    free (inv->board_keys);
    free (inv);
    self->inventory = NULL;
}
