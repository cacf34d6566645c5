// libarchive (Debian's libarchive-dev): the zip reader for client log uploads, built for
// hostile input and fuzzed continuously upstream (docs/reliability.md, "Zip archives").
#include <archive.h>
#include <archive_entry.h>

// The file-type constants are macros with casts, which Swift does not import.
static inline unsigned int midtier_archive_regular_file(void) { return AE_IFREG; }
static inline unsigned int midtier_archive_directory(void) { return AE_IFDIR; }
