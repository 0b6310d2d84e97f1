#!/bin/bash -eu
# Builds the cargo-fuzz targets into $OUT, with each target's committed
# corpus (corpora/fuzz/<target>/) as its seed corpus and its libFuzzer
# options beside it.
#
# ClusterFuzzLite runs this inside the OSS-Fuzz Rust base image, from the
# checkout ($SRC/remora, the Dockerfile's WORKDIR), with OUT, SANITIZER and
# RUSTFLAGS set by the image's `compile`. `ci/fuzz-build` sets the same
# variables and runs it here, without Docker.
#
# SANITIZER: address (AddressSanitizer, release code), undefined (Rust has
# no UBSan: no sanitizer, with debug assertions and overflow checks, which
# is what catches undefined arithmetic in Rust), or coverage (the image's
# cargo wrapper turns the build into an instrumented debug build).
# FUZZ_TARGETS (space-separated names) builds only those; default: all.
set -o pipefail

if [[ ! -f fuzz/Cargo.toml ]]; then
  echo "build.sh: run it from the repository root" >&2
  exit 1
fi

# The committed lock must already hold every dependency: a build that has
# to rewrite it fails here instead of leaving the tree changed.
cargo metadata --locked --format-version 1 --manifest-path fuzz/Cargo.toml >/dev/null

case "$SANITIZER" in
  address) flags=(--sanitizer address) ;;
  undefined) flags=(--sanitizer none --debug-assertions) ;;
  coverage) flags=() ;;
  *)
    echo "build.sh: SANITIZER=$SANITIZER is not supported (address, undefined, coverage)" >&2
    exit 1
    ;;
esac

all=()
for f in fuzz/fuzz_targets/*.rs; do
  all+=("$(basename "$f" .rs)")
done
read -r -a targets <<<"${FUZZ_TARGETS:-}"

if ((${#targets[@]} == 0)); then
  targets=("${all[@]}")
  (cd fuzz && cargo fuzz build -O "${flags[@]}")
else
  for t in "${targets[@]}"; do
    if [[ ! -f fuzz/fuzz_targets/$t.rs ]]; then
      echo "build.sh: no fuzz target $t (have: ${all[*]})" >&2
      exit 1
    fi
    (cd fuzz && cargo fuzz build -O "${flags[@]}" "$t")
  done
fi

built=${CARGO_TARGET_DIR:-fuzz/target}/x86_64-unknown-linux-gnu/release
mkdir -p "$OUT"
out=$(cd "$OUT" && pwd)
for t in "${targets[@]}"; do
  cp "$built/$t" "$out/$t"
  # The nightly runs' input cap (ci/fuzz-nightly); ClusterFuzzLite reads it
  # from here.
  printf '[libfuzzer]\nmax_len = 65536\n' >"$out/$t.options"
  rm -f "$out/${t}_seed_corpus.zip"
  if [[ -d corpora/fuzz/$t ]]; then
    (cd "corpora/fuzz/$t" && zip -q -r "$out/${t}_seed_corpus.zip" .)
  fi
done
echo "build.sh: ${#targets[@]} target(s) in $out (SANITIZER=$SANITIZER)"
