"""The seed documents' LLM pipeline, each stage on the compute it needs:

    tokenize  (CPU)          a synthetic corpus -> a vocabulary and token ids  -> "tokens"
    train     (a big GPU)    a tiny causal transformer, Lightning, checkpoints -> "model"
    evaluate  (a cheap GPU)  perplexity on held-out text, a greedy sample      -> "report"

The data flows by value: ``tokenize``'s output is ``train``'s and ``evaluate``'s input, and
``train``'s output is ``evaluate``'s. Everything is tiny (a few thousand generated sentences
over a 30-word vocabulary, a 2-layer model with 32-wide embeddings) so the whole pipeline runs
on a laptop's CPU in local mode in seconds::

    bourse run --local examples/llm_pipeline.py          # 200 training steps
    bourse run --local examples/llm_pipeline.py 1000     # more

Compute: each stage's ``Compute`` is written as it would be on a GPU exchange (``train`` on
an A100-80GB, spot preferred, at most $2/h; ``evaluate`` on a T4 or an L4). Local mode runs
every stage on this machine whatever its Compute asks for (the code picks CUDA when there is
one, else the CPU). To run it on an exchange that has no GPUs — the embedded one that
``bourse up`` starts on a laptop — make every stage a CPU stage::

    LLM_PIPELINE_COMPUTE=cpu bourse run examples/llm_pipeline.py

Heavy imports (torch, Lightning) stay inside the stages' bodies: the driver and the CPU-only
tokenize stage never load them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from bourse import App, Compute, Flow, Work

CPU_ONLY = os.environ.get("LLM_PIPELINE_COMPUTE", "").lower() == "cpu"
CONTEXT = 12  # tokens the model sees


def compute(gpu: str, **needs: Any) -> Compute:
    """The stage's Compute on a GPU exchange, or a CPU when LLM_PIPELINE_COMPUTE=cpu."""
    return Compute("cpu") if CPU_ONLY else Compute(gpu, **needs)


class Tokenize(Work):
    """Generate sentences from a small grammar, build a word vocabulary, split 90/10."""

    outputs = ("tokens",)

    def run(self, sentences: int = 3000, seed: int = 0) -> dict[str, int]:
        import numpy as np

        rng = np.random.default_rng(seed)
        words = {"det": ["the", "a"], "adj": ["small", "red", "quiet", "old", "fast"],
                 "noun": ["cat", "dog", "model", "robot", "bird", "fox"],
                 "verb": ["sees", "follows", "trains", "likes", "finds"],
                 "adv": ["today", "again", "slowly"]}
        text = []
        for _ in range(sentences):
            subject = [rng.choice(words["det"]), rng.choice(words["adj"]),
                       rng.choice(words["noun"])]
            obj = [rng.choice(words["det"]), rng.choice(words["noun"])]
            tail = [rng.choice(words["adv"])] if rng.random() < 0.5 else []
            text += [*subject, rng.choice(words["verb"]), *obj, *tail, "."]
        vocab = sorted(set(text))
        ids = np.array([vocab.index(w) for w in text], dtype="int64")
        cut = len(ids) * 9 // 10
        out = self.outputs["tokens"]
        np.savez(out / "tokens.npz", train=ids[:cut], val=ids[cut:])
        (out / "vocab.json").write_text(json.dumps(vocab))
        print(f"{sentences} sentences, {len(ids)} tokens, vocabulary of {len(vocab)}")
        return {"vocab": len(vocab), "train_tokens": cut, "val_tokens": len(ids) - cut}


def tiny_lm(vocab: int, width: int = 32, layers: int = 2) -> Any:
    """A causal transformer language model (shared by train and evaluate)."""
    import torch
    from torch import nn

    class TinyLM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(vocab, width)
            self.position = nn.Parameter(torch.zeros(CONTEXT, width))
            layer = nn.TransformerEncoderLayer(width, nhead=4, dim_feedforward=4 * width,
                                               dropout=0.0, batch_first=True)
            self.blocks = nn.TransformerEncoder(layer, layers)
            self.head = nn.Linear(width, vocab)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            n = ids.shape[1]
            mask = nn.Transformer.generate_square_subsequent_mask(n, device=ids.device)
            hidden = self.blocks(self.embed(ids) + self.position[:n], mask=mask,
                                 is_causal=True)
            return self.head(hidden)

    return TinyLM()


def windows(ids: Any) -> Any:
    """(inputs, targets): every CONTEXT-long window and the same window shifted by one."""
    import torch

    spans = torch.as_tensor(ids).unfold(0, CONTEXT + 1, 1)
    return spans[:, :-1], spans[:, 1:]


class Train(Work):
    """Next-token training with Lightning. Checkpoints go to the job's checkpoint URI (every
    epoch and at the end); a retried stage resumes from the newest complete one."""

    outputs = ("model",)

    def run(self, tokens: Path, steps: int = 200, lr: float = 3e-3) -> dict[str, float]:
        import logging
        import warnings

        import lightning as L
        import numpy as np
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        from bourse.lightning import BourseCheckpoint, resume_path

        logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
        warnings.filterwarnings("ignore", message=r".*(LeafSpec|num_workers|weights_only).*")
        vocab = len(json.loads((tokens / "vocab.json").read_text()))
        with np.load(tokens / "tokens.npz") as arrays:
            x, y = windows(arrays["train"])
        net = tiny_lm(vocab)

        class Lm(L.LightningModule):
            def __init__(self) -> None:
                super().__init__()
                self.net = net

            def training_step(self, batch: Any, _index: int) -> torch.Tensor:
                inputs, targets = batch
                logits = self.net(inputs)
                loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1),
                                                         targets.flatten())
                self.log("train_loss", loss)
                return loss

            def configure_optimizers(self) -> torch.optim.Optimizer:
                return torch.optim.AdamW(self.parameters(), lr=lr)

        L.seed_everything(0, verbose=False)
        torch.set_num_threads(1)  # a model this small: more threads cost more than they save
        trainer = L.Trainer(max_steps=steps, accelerator="auto", devices=1, logger=False,
                            enable_progress_bar=False, enable_model_summary=False,
                            enable_checkpointing=False,
                            callbacks=[BourseCheckpoint(self.checkpoint)])
        loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True)
        trainer.fit(Lm(), loader, ckpt_path=resume_path(self.checkpoint))
        torch.save(net.state_dict(), self.outputs["model"] / "model.pt")
        (self.outputs["model"] / "config.json").write_text(json.dumps({"vocab": vocab}))
        loss = float(trainer.callback_metrics["train_loss"])
        print(f"trained {steps} steps, last loss {loss:.3f}")
        return {"train_loss": loss}


class Evaluate(Work):
    """Perplexity on the held-out tokens against two baselines, and a greedy sample."""

    outputs = ("report",)

    def run(self, tokens: Path, model: Path) -> dict[str, Any]:
        import numpy as np
        import torch

        vocab = json.loads((tokens / "vocab.json").read_text())
        torch.set_num_threads(1)
        net = tiny_lm(json.loads((model / "config.json").read_text())["vocab"])
        net.load_state_dict(torch.load(model / "model.pt"))
        net.eval()
        with np.load(tokens / "tokens.npz") as arrays:
            x, y = windows(arrays["val"])
            counts = np.bincount(arrays["train"], minlength=len(vocab)) + 1
        with torch.no_grad():
            logits = net(x)
            loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten())
        unigram = -float(np.mean(np.log(counts / counts.sum())[y.flatten().numpy()]))
        report = {"perplexity": round(float(torch.exp(loss)), 3),
                  "unigram_perplexity": round(float(np.exp(unigram)), 3),
                  "uniform_perplexity": len(vocab), "sample": self.sample(net, vocab)}
        (self.outputs["report"] / "report.json").write_text(json.dumps(report, indent=2))
        print(f"perplexity {report['perplexity']} (unigram {report['unigram_perplexity']},"
              f" uniform {len(vocab)}); sample: {report['sample']}")
        return report

    @staticmethod
    def sample(net: Any, vocab: list[str], words: int = 12) -> str:
        import torch

        ids = [vocab.index("the")]
        with torch.no_grad():
            for _ in range(words):
                logits = net(torch.tensor([ids[-CONTEXT:]]))
                ids.append(int(logits[0, -1].argmax()))
        return " ".join(vocab[i] for i in ids)


class LLMPipeline(Flow):
    def __init__(self) -> None:
        self.tokenize = Tokenize(compute=compute("cpu", cpus=4, memory="8GB"))
        self.train = Train(compute=compute("a100-80gb", disk="100GB", spot="prefer",
                                           max_price=2.0), retries=2)
        self.evaluate = Evaluate(compute=compute("t4|l4"))

    def run(self, steps: str = "200") -> dict[str, Any]:
        tokens = self.tokenize.run(sentences=3000).outputs["tokens"]
        model = self.train.run(tokens=tokens, steps=int(steps)).outputs["model"]
        report = self.evaluate.run(tokens=tokens, model=model)
        return report.value  # type: ignore[no-any-return]


app = App(LLMPipeline())
