#!/usr/bin/env python3
"""Writes test fixtures with TensorFlow itself (the real producer), for tests/oracle/test_tf_import.py:

  tf_writer.py checkpoint TENSORS.npz PREFIX STEP   a TF1 checkpoint (tf.compat.v1.train.Saver) of
                                                   the npz's arrays under their (Google BERT) names
                                                   plus global_step; prints the checkpoint path
  tf_writer.py tfrecord FILES.json L P              tf.train.Examples as Google's
                                                   create_pretraining_data.py writes them, for
                                                   FILES.json = {output path: [instance, ...]}

Runs under any Python with tensorflow (tensorflow-cpu) installed; it imports nothing of ours.
"""
import collections
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def write_checkpoint(npz_path, prefix, step):
    arrays = np.load(npz_path)
    tf.compat.v1.disable_eager_execution()
    graph = tf.Graph()
    with graph.as_default():
        for name in arrays.files:
            tf.compat.v1.get_variable(name, initializer=tf.constant(arrays[name]), use_resource=False)
        global_step = tf.compat.v1.train.get_or_create_global_step()
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            sess.run(global_step.assign(step))
            print(saver.save(sess, prefix, global_step=global_step))


def create_int_feature(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))


def create_float_feature(values):
    return tf.train.Feature(float_list=tf.train.FloatList(value=list(values)))


def write_tfrecords(json_path, max_seq_length, max_predictions):
    with open(json_path) as f:
        files = json.load(f)
    for out_path, instances in files.items():
        write_tfrecord(instances, out_path, max_seq_length, max_predictions)


def write_tfrecord(instances, out_path, max_seq_length, max_predictions):
    """The feature layout of write_instance_to_example_files in create_pretraining_data.py."""
    with tf.io.TFRecordWriter(out_path) as writer:
        for inst in instances:
            input_ids = list(inst["input_ids"])
            input_mask = [1] * len(input_ids)
            segment_ids = list(inst["segment_ids"])
            while len(input_ids) < max_seq_length:
                input_ids.append(0)
                input_mask.append(0)
                segment_ids.append(0)
            positions = list(inst["masked_lm_positions"])
            ids = list(inst["masked_lm_ids"])
            weights = [1.0] * len(ids)
            while len(positions) < max_predictions:
                positions.append(0)
                ids.append(0)
                weights.append(0.0)
            features = collections.OrderedDict()
            features["input_ids"] = create_int_feature(input_ids)
            features["input_mask"] = create_int_feature(input_mask)
            features["segment_ids"] = create_int_feature(segment_ids)
            features["masked_lm_positions"] = create_int_feature(positions)
            features["masked_lm_ids"] = create_int_feature(ids)
            features["masked_lm_weights"] = create_float_feature(weights)
            features["next_sentence_labels"] = create_int_feature([1 if inst["is_random_next"] else 0])
            example = tf.train.Example(features=tf.train.Features(feature=features))
            writer.write(example.SerializeToString())


def main():
    if len(sys.argv) >= 5 and sys.argv[1] == "checkpoint":
        write_checkpoint(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif len(sys.argv) == 5 and sys.argv[1] == "tfrecord":
        write_tfrecords(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
