"""Every model variant with its .nir, reference module and inputs, for
scripts/check_models.py, scripts/bench_models.py and models/make_all.sh.

    entry = VARIANTS["lstm_2l"]
    entry.nir, entry.weights, entry.reference (module), entry.inputs() -> [Input]

Full-size inputs come from <model>/inputs/index.json (written by the model's
make_inputs.py); the small variants' inputs are their committed fixtures.
"""

import glob
import importlib
import json
import os

MODELS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO_ROOT = os.path.dirname(MODELS_DIR)


class Input:
    def __init__(self, path, work):
        self.path = path  # the file nimble-run and the reference read
        self.work = work  # tokens (LSTM, BERT) or tree nodes (Tree-LSTM)

    @property
    def name(self):
        return os.path.basename(self.path)


class Variant:
    def __init__(self, name, family, full):
        self.name, self.family, self.full = name, family, full
        self._variants = importlib.import_module("models.%s.variants" % family)
        self.reference = importlib.import_module("models.%s.reference" % family)
        self.nir = self._variants.nir_path(name)
        self.weights = self._variants.weights_path(name)
        self.unit = self.reference.UNIT
        self.dir = os.path.join(MODELS_DIR, family)

    def inputs(self):
        """[Input]; raises FileNotFoundError (with a hint) when not generated."""
        if self.full:
            index = os.path.join(self.dir, "inputs", "index.json")
            if not os.path.exists(index):
                raise FileNotFoundError(
                    "%s missing: run models/make_all.sh" % os.path.relpath(index, REPO_ROOT))
            with open(index) as f:
                entries = json.load(f)
            key = "nodes" if "nodes" in entries[0] else "tokens"
            return [Input(os.path.join(self.dir, "inputs", e["file"]), e[key]) for e in entries]
        pattern = {"lstm": "seq_??.npy", "treelstm": "tree_??.txt", "bert": "ids_??.npy"}[self.family]
        paths = sorted(glob.glob(os.path.join(self.dir, "small", "fixtures", pattern)))
        return [Input(p, self.reference.work(self.reference.read_input(p))) for p in paths]


VARIANTS = {
    v.name: v
    for v in (
        Variant("lstm_1l", "lstm", True),
        Variant("lstm_2l", "lstm", True),
        Variant("treelstm", "treelstm", True),
        Variant("bert_base", "bert", True),
        Variant("lstm_small", "lstm", False),
        Variant("treelstm_small", "treelstm", False),
        Variant("bert_small", "bert", False),
    )
}

FULL = [n for n, v in VARIANTS.items() if v.full]
SMALL = [n for n, v in VARIANTS.items() if not v.full]
