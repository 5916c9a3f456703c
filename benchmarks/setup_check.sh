#!/usr/bin/env bash
# The CUDA set-up of docs/install.md on a GPU machine, in one call: `make setup` with its torch,
# then the installed `opsweep` script, and the rows' clock and power columns.
#   bash benchmarks/setup_check.sh WHEELS_DIR
# A GPU host without network: its torch and nvidia-ml-py are in the system
# site-packages, so the virtual environment sees them (--system-site-packages) and pip
# installs from WHEELS_DIR only (hydra-core, omegaconf, antlr4). EXTRAS= leaves out [dev]
# (pytest, ruff, nbclient: not wheels here); the [gpu] extra comes from nvidia-smi's presence.
set -uo pipefail
WHEELS=$(cd "${1:?WHEELS_DIR}" && pwd)
OUT=${OUT:-/tmp/opsweep-setup-check}
mkdir -p "$OUT"
python3 -m venv --system-site-packages .venv
# python3 may itself be a virtual environment (then its packages are not "system" ones to a
# venv made from it): a .pth file hands them to .venv, as a CUDA torch install would be there
.venv/bin/python -c "import torch" 2>/dev/null || python3 - <<'PTH'
import sys
target = f".venv/lib/python{sys.version_info[0]}.{sys.version_info[1]}/site-packages/parent.pth"
paths = [p for p in sys.path if p.endswith("-packages")]
open(target, "w").write("\n".join(paths) + "\n")
print("parent packages:", paths, "prefix", sys.prefix, "base", sys.base_prefix)
PTH
export PIP_NO_INDEX=1 PIP_FIND_LINKS="$WHEELS" PIP_DISABLE_PIP_VERSION_CHECK=1
make help
# the system's setuptools builds the editable install (no index to fetch one from)
PIP_NO_BUILD_ISOLATION=0 make setup TORCH_SPEC=torch EXTRAS= 2>&1 | grep -v "^WARNING: Location" \
  | tail -5
ls .venv/.installed-* .venv/bin/opsweep*
.venv/bin/python -c "import pynvml, torch; print('nvidia-ml-py', pynvml.__name__, 'torch',
torch.__version__, 'cuda', torch.cuda.is_available())"
.venv/bin/opsweep op=matmul 'shape=[[4096,4096,4096],[8192,8192,8192]]' 'dtype=[bf16]' \
  timer=quick results_dir="$OUT/results" 2>&1 | grep -v "^\s*$"
.venv/bin/python - "$OUT/results" <<'EOF'
import sys
import runner
df = runner.load(sys.argv[1])
cols = ["op", "dtype", "shape_str", "device", "gpu_time_us", "time_median_us", "tflops",
        "bound", "sm_clock_mhz_start", "sm_clock_mhz_end", "power_w_start", "power_w_end",
        "temperature_c_end", "num_threads_used", "git_commit"]
print(df[[c for c in cols if c in df.columns]].to_string(index=False))
EOF
