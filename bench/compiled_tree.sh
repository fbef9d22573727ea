#!/usr/bin/env bash
# The rules judge's modules compiled as they are, for bench/rules_speed.py --tree DIR:
#
#     bash bench/compiled_tree.sh mypyc  /tmp/veredito-mypyc     # mypy's compiler (in .venv)
#     bash bench/compiled_tree.sh cython /tmp/veredito-cython    # needs: .venv/bin/pip install cython
#     .venv/bin/python bench/rules_speed.py --n 2000 --repeat 3 --tree /tmp/veredito-mypyc
#
# Lays the checkout out as the installed package (DIR/veredito/{producer,worker,prompts}) and
# compiles worker/rules/*.py there into C extensions, which Python imports instead of the .py
# files. Left out: scan.py for mypyc (its Hyperscan class loses an attribute when compiled) and
# text.py for Cython (its compiler fails on a lambda there); both stay Python. Measured in
# docs/benchmarks.md, "Compiling the judge's Python as it is".
set -euo pipefail
cd "$(dirname "$0")/.."
how=${1:?mypyc or cython}
dir=${2:?a directory to build the tree in}
rm -rf "$dir"
mkdir -p "$dir"
cp -r veredito "$dir/veredito"
for sub in producer worker prompts; do cp -r "$sub" "$dir/veredito/$sub"; done
find "$dir" -name __pycache__ -prune -exec rm -rf {} +
root=$(pwd)
cd "$dir"
modules=$(ls veredito/worker/rules/*.py | grep -v __init__)
case "$how" in
  mypyc)
    cat > mypy.ini <<'INI'
[mypy]
strict = True
[mypy-celery.*,kombu.*,validate_docbr.*,text_to_num.*,Stemmer.*,hyperscan.*,Stemmer,hyperscan]
ignore_missing_imports = True
follow_imports = skip
INI
    "$root/.venv/bin/mypyc" $(echo "$modules" | grep -v '/scan.py$') >"$dir/build.log" 2>&1 ;;
  cython)
    "$root/.venv/bin/cythonize" -i -3 $(echo "$modules" | grep -v '/text.py$') >"$dir/build.log" 2>&1 ;;
  *)
    echo "mypyc or cython, not $how" >&2
    exit 2 ;;
esac
echo "$(ls veredito/worker/rules/*.so | wc -l) modules compiled in $dir (log: $dir/build.log)"
