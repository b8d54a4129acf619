/* path.h: file-name helpers shared by the readers and writers. */
#ifndef SD_PATH_H
#define SD_PATH_H

/* "dir/name" in a new malloc'd string (no doubled '/' when dir already ends in one); NULL when
 * out of memory. The caller frees it. */
char *sd_path_join(const char *dir, const char *name);

#endif
