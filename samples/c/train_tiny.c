/* train_tiny.c: trains a tiny BERT on synthetic data through the C ABI alone, evaluates it,
 * and saves the weights. Usage: train_tiny [steps] [checkpoint.h5] */
#include <stdio.h>
#include <stdlib.h>

#include <bert.h>

static int check(bert_status status, const char* what) {
  if (status != BERT_OK) {
    fprintf(stderr, "%s failed: %s: %s\n", what, bert_status_string(status), bert_last_error());
    return 1;
  }
  return 0;
}

int main(int argc, char** argv) {
  const int steps = argc > 1 ? atoi(argv[1]) : 20;
  const char* path = argc > 2 ? argv[2] : "train_tiny.h5";
  char config[512];
  snprintf(config, sizeof config,
           "{\"model\": {\"preset\": \"bert-tiny\", \"vocab_size\": 2048},"
           " \"train\": {\"micro_batch\": 8, \"steps\": %d, \"lr\": 0.01, \"warmup_proportion\": 0.1},"
           " \"data\": {\"max_seq_length\": 64, \"max_predictions_per_seq\": 10}}",
           steps);

  printf("bertengine %s (ABI %d)\n", bert_version(), bert_api_version());
  bert_session* session = NULL;
  if (check(bert_session_create(config, NULL, &session), "bert_session_create")) return 1;

  bert_step_result result;
  bert_step_result_init(&result);
  for (int i = 0; i < steps; ++i) {
    if (check(bert_step(session, NULL, &result), "bert_step")) goto fail;
    printf("step %3lld  loss %.4f  mlm %.4f  nsp %.4f  lr %.2e  %.1f seq/s\n", (long long)result.step,
           result.loss, result.mlm_loss, result.nsp_loss, result.learning_rate, result.sequences_per_second);
  }

  bert_eval_result eval;
  bert_eval_result_init(&eval);
  if (check(bert_eval(session, NULL, &eval), "bert_eval")) goto fail;
  printf("eval: mlm accuracy %.4f, mlm loss %.4f, nsp accuracy %.4f\n", eval.mlm_accuracy, eval.mlm_loss,
         eval.nsp_accuracy);
  if (check(bert_checkpoint(session, path), "bert_checkpoint")) goto fail;
  printf("saved %s\n", path);
  bert_session_destroy(session);
  return 0;
fail:
  bert_session_destroy(session);
  return 1;
}
