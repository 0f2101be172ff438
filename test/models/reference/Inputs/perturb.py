"""perturb.py FILE.npy DELTA: adds DELTA to the element of largest magnitude
of a float .npy file, in place (a fixture gone stale by one value)."""
import sys

import numpy as np

path, delta = sys.argv[1], float(sys.argv[2])
a = np.load(path)
flat = a.reshape(-1)
i = int(np.argmax(np.abs(flat)))
flat[i] += np.asarray(delta, dtype=a.dtype)
np.save(path, a)
