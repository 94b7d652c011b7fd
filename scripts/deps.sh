#!/bin/sh
# Makes sure the build's libraries are present. On Debian/Ubuntu as root the missing
# -dev packages are installed; anywhere else we stop and name what is missing.
set -u
# libgnutls28-dev: the webhook's certificates (certs.c) and --tls-client-ca. The code still
# compiles without it (EXT_HAVE_GNUTLS unset), but then it cannot make certificates.
# libyaml-dev: the tests read deploy/'s manifests to run tessera as deployed (tests/support/yaml_json.c).
# libnghttp2-dev: the tests' fake kubelet Pod Resources gRPC server (tests/support/fake_podresources.c).
pkgs="libmicrohttpd-dev libcjson-dev libcurl4-openssl-dev libjemalloc-dev libgnutls28-dev libyaml-dev libnghttp2-dev pkg-config"
# TESSERA_DEPS_FUZZ=1 (scripts/fuzz.sh, `make fuzz` only): clang and its compiler-rt, which holds
# libFuzzer and the sanitizer runtimes (-fsanitize=fuzzer,address,undefined). `make` and
# `make test` never need them.
[ "${TESSERA_DEPS_FUZZ:-0}" = 1 ] && pkgs="$pkgs clang libclang-rt-dev"
missing=""
if command -v dpkg-query >/dev/null 2>&1; then
    for p in $pkgs; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
    done
else
    for m in libmicrohttpd libcjson libcurl jemalloc gnutls yaml-0.1 libnghttp2; do
        pkg-config --exists "$m" 2>/dev/null || missing="$missing $m"
    done
fi
# Optional: python3 with PyYAML runs the deployment manifest checks in `make test`.
# Installed when we can, skipped (with a note) when we cannot.
optional=""
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && \
   ! python3 -c 'import yaml' >/dev/null 2>&1; then
    optional="python3 python3-yaml"
fi
# A C compiler and the C library headers: on a bare Debian image only make may be there.
if ! command -v gcc >/dev/null 2>&1; then
    missing="$missing gcc libc6-dev"
fi
# TESSERA_DEPS_OPTIONAL=0 skips the optional packages (the container build needs neither).
[ "${TESSERA_DEPS_OPTIONAL:-1}" = 0 ] && optional=""
if [ -z "$missing" ]; then
    if [ -n "$optional" ]; then
        echo "deps: installing $optional (for the manifest checks)" >&2
        export DEBIAN_FRONTEND=noninteractive
        { apt-get update -qq && apt-get install -y -qq --no-install-recommends $optional; } >/dev/null 2>&1 || \
            echo "deps: could not install $optional (the manifest checks will be skipped)" >&2
    fi
    exit 0
fi

if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "deps: installing$missing" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null 2>&1 || true
    if apt-get install -y -qq --no-install-recommends $missing >/dev/null 2>&1; then
        [ -z "$optional" ] || apt-get install -y -qq --no-install-recommends $optional >/dev/null 2>&1 || \
            echo "deps: could not install $optional (the manifest checks will be skipped)" >&2
        exit 0
    fi
    echo "deps: apt-get install$missing failed" >&2
    exit 1
fi
echo "deps: missing build dependencies:$missing" >&2
echo "deps: on Debian/Ubuntu run as root: apt-get install$missing" >&2
echo "deps: elsewhere install a C compiler, libmicrohttpd, cJSON, libcurl, jemalloc and GnuTLS with their headers and pkg-config files" >&2
[ "${TESSERA_DEPS_FUZZ:-0}" = 1 ] && echo "deps: make fuzz also needs clang with libFuzzer (compiler-rt)" >&2
exit 1
