/*  keymgmt_int.h — shared by keymgmt.c and keymgmt_check.c only.  */
#ifndef CS_MODULE_KEYMGMT_INT_H_INCLUDED
#define CS_MODULE_KEYMGMT_INT_H_INCLUDED

#include <stdbool.h>
#include "cs_p11.h"

/*  Attributes only the token sets (cs_attr_rules.h: CS_ATTR_COMPUTED).  */
bool cs_keymgmt_token_only (CK_ATTRIBUTE_TYPE type);

/*  What a session object never stores: it comes from its key or entry.  */
bool cs_keymgmt_not_stored (CK_ATTRIBUTE_TYPE type);

#endif
