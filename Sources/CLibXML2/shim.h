#ifndef MIDTIER_CLIBXML2_SHIM_H
#define MIDTIER_CLIBXML2_SHIM_H
// Debian's libxml2 headers pull in system ICU, whose UErrorCode clashes with Foundation's.
#include <libxml/xmlversion.h>
#undef LIBXML_ICU_ENABLED
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/xpath.h>
#include <libxml/xpathInternals.h>
#include <libxml/c14n.h>
#include <libxml/xmlerror.h>
#include <libxml/xmlsave.h>

/// `xmlFree` is a global function pointer; Swift 6 refuses it as shared mutable state.
static inline void midtier_xmlFree(void *p) { xmlFree(p); }
#endif
