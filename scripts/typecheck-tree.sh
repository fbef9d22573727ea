#!/usr/bin/env bash
# Lays out the installed package's shape for mypy: DIR/veredito/{producer,worker,prompts} as links
# to the repository's top-level folders. The build maps them the same way (pyproject.toml,
# [tool.setuptools.package-dir]); mypy cannot follow that mapping by itself.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build/typecheck}
rm -rf "$dir"
mkdir -p "$dir/veredito"
root=$(pwd)
for entry in veredito/*; do
  ln -s "$root/$entry" "$dir/$entry"
done
for sub in producer worker prompts; do
  ln -s "$root/$sub" "$dir/veredito/$sub"
done
