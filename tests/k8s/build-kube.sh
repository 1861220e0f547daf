#!/usr/bin/env bash
# Builds kube-apiserver and kube-scheduler v1.20.2 (what tests/k8s/cluster.py runs, with
# Debian's etcd-server) from Debian bookworm's source package
# kubernetes=1.20.5+really1.20.2-1.1+deb12u1 (vendored tree, Debian's patches applied by
# dpkg-source) with Debian's Go (golang-go, 1.19), offline (GOPROXY=off), CGO_ENABLED=0.
# Never downloads a prebuilt binary: only the Debian source package (apt-get source, through a
# private apt config; /etc/apt is not touched) and, as root, the Debian packages golang-go,
# etcd-server, dpkg-dev.
#
# No source patch is needed, but two things `make` would do are done by hand:
# * Kubernetes 1.20 builds in GOPATH mode (its hack/lib/init.sh sets GO111MODULE=off): in module
#   mode Go 1.19 refuses its go.mod ("updates to go.mod needed, disabled by -mod=vendor"). So
#   the source is linked in as $GOPATH/src/k8s.io/kubernetes and built there (vendor/ is used);
# * pkg/generated/openapi/zz_generated.openapi.go is generated (openapi-gen, from vendor/).
#
# Took here (2 CPUs shared with a running test suite, nice 19, cold Go cache): about 11 min
# wall, 7.5 min CPU (unpack 7 s, openapi-gen 30 s, kube-apiserver 10 min, kube-scheduler 25 s);
# with a warm $C/gocache a rebuild takes ~15 s. Needs ~1.3 GiB of Go cache, ~300 MiB of source, ~150 MiB of binaries.
#
# Usage: tests/k8s/build-kube.sh [CACHE_DIR]   (default ${BOURSE_KUBE_CACHE:-~/.cache/bourse-kube})
# Idempotent: does nothing but print where the binaries are once $C/bin has them. Set
# BOURSE_KUBE_DEBSRC to a folder already holding the .dsc/.orig.tar.gz/.debian.tar.xz to skip
# the download.
set -euo pipefail

C=${1:-${BOURSE_KUBE_CACHE:-$HOME/.cache/bourse-kube}}
VERSION=1.20.5+really1.20.2-1.1+deb12u1
SRCDIR=kubernetes-1.20.5+really1.20.2
GIT_VERSION=v1.20.2
BINS=(kube-apiserver kube-scheduler)
mkdir -p "$C"
C=$(cd "$C" && pwd)

have_bins() {
  for b in "${BINS[@]}"; do [[ -x $C/bin/$b ]] || return 1; done
}

if ! have_bins; then
  start=$(date +%s)

  # 1. tools (Debian packages)
  missing=()
  command -v go >/dev/null || missing+=(golang-go)
  command -v etcd >/dev/null || missing+=(etcd-server)
  command -v dpkg-source >/dev/null || missing+=(dpkg-dev)
  if ((${#missing[@]})); then
    if [[ $(id -u) != 0 ]]; then
      echo "build-kube.sh: missing ${missing[*]}; install them (apt-get install ${missing[*]})" >&2
      exit 1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
  fi

  # 2. the source package, unpacked with Debian's patches
  mkdir -p "$C/src"
  if [[ ! -d $C/src/$SRCDIR/vendor ]]; then
    if [[ ! -f $C/src/kubernetes_$VERSION.dsc ]]; then
      if [[ -n ${BOURSE_KUBE_DEBSRC:-} ]]; then
        cp "$BOURSE_KUBE_DEBSRC"/kubernetes_* "$C/src/"
      else
        # a private apt config: its own sources.list, lists and caches; /etc/apt untouched
        mkdir -p "$C/apt/lists/partial" "$C/apt/cache/archives/partial"
        printf 'deb-src http://deb.debian.org/debian bookworm main\n' > "$C/apt/sources.list"
        APTO=(-o "Dir::Etc::SourceList=$C/apt/sources.list" -o "Dir::Etc::SourceParts=/nonexistent"
              -o "Dir::State::Lists=$C/apt/lists" -o "Dir::Cache=$C/apt/cache")
        apt-get "${APTO[@]}" update
        (cd "$C/src" && apt-get "${APTO[@]}" source --download-only "kubernetes=$VERSION")
      fi
    fi
    rm -rf "${C:?}/src/$SRCDIR"
    (cd "$C/src" && nice -n 19 dpkg-source -x "kubernetes_$VERSION.dsc" "$SRCDIR")
  fi

  # 3. build, in GOPATH mode like Kubernetes' own hack/ scripts
  export GOPATH=$C/gopath GOCACHE=$C/gocache CGO_ENABLED=0 GOPROXY=off GO111MODULE=off GOFLAGS=
  export GOTOOLCHAIN=local  # a newer Go must not try to fetch another toolchain
  mkdir -p "$GOPATH/src/k8s.io" "$C/bin"
  ln -sfn "$C/src/$SRCDIR" "$GOPATH/src/k8s.io/kubernetes"
  # the version, as hack/lib/version.sh stamps it (client-go's is what /version serves)
  LDFLAGS="-s -w"
  for V in k8s.io/kubernetes/vendor/k8s.io/client-go/pkg/version \
           k8s.io/kubernetes/vendor/k8s.io/component-base/version; do
    LDFLAGS+=" -X $V.gitVersion=$GIT_VERSION -X $V.gitMajor=1 -X $V.gitMinor=20"
    LDFLAGS+=" -X $V.gitTreeState=clean -X $V.buildDate=1970-01-01T00:00:00Z"
  done
  cd "$GOPATH/src/k8s.io/kubernetes"
  # pkg/generated/openapi is generated at build time (Makefile.generated_files, gen_openapi);
  # the other zz_generated files ship in the tarball. Same inputs as the Makefile's KUBE
  # target: its violation report matches api/api-rules/violation_exceptions.list exactly.
  OPENAPI=pkg/generated/openapi/zz_generated.openapi.go
  if [[ ! -s $OPENAPI ]]; then
    nice -n 19 go build -o "$GOPATH/bin/openapi-gen" ./vendor/k8s.io/kube-openapi/cmd/openapi-gen
    dirs=$(set +o pipefail  # grep -l exits 1 on a batch without a match
           find -H . \( -path './_*' -o -path './.*' -o -path ./vendor \) -prune \
             -o -type f -name '*.go' -print \
           | sed 's|^\./staging/src|vendor|; s|^\./||' \
           | grep -v -e '^vendor/k8s.io/code-generator/' -e '^vendor/k8s.io/sample-apiserver/' \
           | xargs grep -l '^// *+k8s:' | xargs grep -l '+k8s:openapi-gen=' \
           | xargs -n1 dirname | LC_ALL=C sort -u | sed 's|^|k8s.io/kubernetes/|' | paste -sd, -)
    nice -n 19 "$GOPATH/bin/openapi-gen" --logtostderr -i "$dirs" \
      -p k8s.io/kubernetes/pkg/generated/openapi -O zz_generated.openapi \
      -h vendor/k8s.io/code-generator/hack/boilerplate.go.txt -r "$C/openapi-violations.report"
  fi
  for b in "${BINS[@]}"; do
    nice -n 19 go build -trimpath -ldflags "$LDFLAGS" -o "$C/bin/$b.tmp" "./cmd/$b"
    mv "$C/bin/$b.tmp" "$C/bin/$b"
  done
  echo "build-kube.sh: built in $(($(date +%s) - start)) s" >&2
fi

for b in "${BINS[@]}"; do "$C/bin/$b" --version; done
echo "etcd: $(command -v etcd || echo 'missing (apt-get install etcd-server)')"
echo "binaries: $C/bin (BOURSE_KUBE_BIN=$C/bin)"
