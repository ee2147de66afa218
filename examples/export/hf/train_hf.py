"""Hugging Face Trainer: llama2-7b on 2048× a100-80gb, tp=1 pp=1 dp=2048 zero=3 recompute=none micro_batch=1, bf16.

Run beside training_args.json (and lora_config.json / bnb_config.json for a fine-tune) on each node:
    torchrun --nnodes 256 --nproc-per-node 8 train_hf.py MODEL DATA
MODEL: a model name or path (its weights for a fine-tune, its config for training from scratch);
DATA: text files (a glob) packed into 4096-token sequences.
"""

import json
import os
import sys

from datasets import load_dataset
from transformers import (AutoConfig, AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig, Trainer,
                          TrainingArguments, default_data_collator)
from transformers.trainer_utils import get_last_checkpoint

HERE = os.path.dirname(os.path.abspath(__file__))
SEQ = 4096


def read(name):
    path = os.path.join(HERE, name)
    return json.load(open(path)) if os.path.exists(path) else None


def main(model_name, data):
    args = TrainingArguments(**read("training_args.json"))
    lora, bnb = read("lora_config.json"), read("bnb_config.json")
    tok = AutoTokenizer.from_pretrained(model_name)
    if lora is None:  # training from scratch: the architecture, fresh weights
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(model_name), attn_implementation="sdpa")
    else:
        quant = BitsAndBytesConfig(**bnb) if bnb else None
        model = AutoModelForCausalLM.from_pretrained(model_name, quantization_config=quant,
                                                     attn_implementation="sdpa")
        from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training

        if quant is not None:
            model = prepare_model_for_kbit_training(model, args.gradient_checkpointing)
        model = get_peft_model(model, LoraConfig(**lora))
    text = load_dataset("text", data_files=data, split="train")
    ids = text.map(lambda b: tok(b["text"]), batched=True, remove_columns=["text"])

    def pack(b):  # concatenate, cut into SEQ-token sequences
        flat = [t for seq in b["input_ids"] for t in seq]
        n = len(flat) // SEQ * SEQ
        blocks = [flat[i:i + SEQ] for i in range(0, n, SEQ)]
        return {"input_ids": blocks, "labels": [list(x) for x in blocks]}

    train = ids.map(pack, batched=True, remove_columns=ids.column_names)
    trainer = Trainer(model=model, args=args, train_dataset=train, data_collator=default_data_collator)
    last = get_last_checkpoint(args.output_dir) if os.path.isdir(args.output_dir) else None
    trainer.train(resume_from_checkpoint=last)  # after a failure: from the latest save


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
