/* A QEMU TCG plugin (API version 1, QEMU 7.2 as in Debian 12) that counts how often each
 * translated block runs and writes "vaddr instructions executions" per block at exit, to the file
 * named by TB_PROFILE_OUT (default tb_profile.txt). Single-threaded guests only: the counters are
 * plain inline adds. The few declarations it needs from QEMU's plugin API are written out here, so
 * that no QEMU headers are needed to build it:
 *   gcc -O2 -shared -fPIC -o tb_profile.so tb_profile.c */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef uint64_t qemu_plugin_id_t;
struct qemu_plugin_tb;
typedef struct qemu_info_t qemu_info_t;
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t, struct qemu_plugin_tb*);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t, void*);
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t, qemu_plugin_vcpu_tb_trans_cb_t);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb*);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb*);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb*, enum qemu_plugin_op, void*,
                                              uint64_t);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t, qemu_plugin_udata_cb_t, void*);
uint64_t qemu_plugin_start_code(void);

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

struct block {
  uint64_t vaddr, instructions, executions;
  struct block* next;
};
static struct block* blocks;

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb* tb) {
  (void)id;
  struct block* b = calloc(1, sizeof *b);
  if (b == NULL) abort();
  b->vaddr = qemu_plugin_tb_vaddr(tb);
  b->instructions = qemu_plugin_tb_n_insns(tb);
  b->next = blocks;
  blocks = b;
  qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &b->executions, 1);
}

static void write_profile(qemu_plugin_id_t id, void* data) {
  (void)id;
  (void)data;
  const char* path = getenv("TB_PROFILE_OUT") ? getenv("TB_PROFILE_OUT") : "tb_profile.txt";
  FILE* out = fopen(path, "w");
  if (out == NULL) {
    fprintf(stderr, "tb_profile: cannot write %s\n", path);
    return;
  }
  fprintf(out, "start_code %llx\n", (unsigned long long)qemu_plugin_start_code());
  for (struct block* b = blocks; b != NULL; b = b->next) {
    if (b->executions != 0) {
      fprintf(out, "%llx %llu %llu\n", (unsigned long long)b->vaddr,
              (unsigned long long)b->instructions, (unsigned long long)b->executions);
    }
  }
  fclose(out);
}

__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id,
                                                               const qemu_info_t* info, int argc,
                                                               char** argv) {
  (void)info;
  (void)argc;
  (void)argv;
  qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
  qemu_plugin_register_atexit_cb(id, write_profile, NULL);
  return 0;
}
