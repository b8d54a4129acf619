/* model_dir.h: is DIR something specdec reads? The first check of every model load. */
#ifndef SD_MODEL_DIR_H
#define SD_MODEL_DIR_H
#include "specdec.h"

/* SPECDEC_OK when `dir` is a directory or does not exist (the loaders then name the missing
 * file). A regular file is refused: a GGUF file (magic "GGUF") by name, saying GGUF is not read
 * and what is; any other file as not a model directory. A directory that has no config.json but
 * holds a *.gguf file is refused the same way, naming that file. */
specdec_status sd_model_dir_check(const char *dir, specdec_err *err);

#endif
