/* Compiles bert.h as strict C99 with -Wall -Werror -pedantic and checks a few ABI facts at
 * run time: the header's version matches the library's, and init functions set struct_size. */
#include <bert.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  bert_batch batch;
  bert_step_result result;
  bert_eval_result eval;
  bert_dist dist;
  bert_batch_init(&batch);
  bert_step_result_init(&result);
  bert_eval_result_init(&eval);
  bert_dist_init(&dist);
  if (bert_api_version() != BERT_API_VERSION) return 1;
  if (batch.struct_size != sizeof batch || result.struct_size != sizeof result) return 2;
  if (eval.struct_size != sizeof eval || dist.struct_size != sizeof dist) return 3;
  if (dist.rank != -1 || dist.backend != BERT_DIST_AUTO) return 4;
  if (strcmp(bert_status_string(BERT_ERR_CONFIG), "BERT_ERR_CONFIG") != 0) return 5;
  printf("bert.h compiles as C99; library %s\n", bert_version());
  return 0;
}
