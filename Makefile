# Gatehouse. `make run` starts a local control plane with Gatehouse; `make test`
# runs every test. Both build what is missing into bin/ first.

SHELL := /usr/bin/env bash
BIN   := $(CURDIR)/bin
GO    ?= go

# VERSION is the release version linked into Gatehouse (--version,
# gatehouse_build_info): v and the chart's appVersion unless given.
APP_VERSION := $(shell sed -n 's/^appVersion: *//p' charts/gatehouse/Chart.yaml)
VERSION     ?= v$(APP_VERSION)

# Images, written by `make image` as OCI image archives (no engine, no
# registry): `ctr -n k8s.io images import $(IMAGE_ARCHIVE)` names the image
# $(IMAGE). IMAGE is exactly what the chart pulls by default: values.yaml's
# image.repository and the appVersion (VERSION without its v).
# PAUSE_IMAGE is the sandbox image for containerd's sandbox_image on the
# local real node (hack/pause), PAUSE_IMAGE_ARCHIVE its archive.
# IMAGE_LISTING lists the image's files, Go modules and Debian packages;
# IMAGE_SBOM says the same as an SPDX 2.3 document. IMAGE_PLATFORMS are
# the platforms of the image index in IMAGE_INDEX_ARCHIVE (what a release
# pushes); IMAGE_ARCHIVE holds IMAGE_PLATFORM's image alone, for the local
# containerd. DEB_CACHE keeps the pinned Debian packages (hack/image/debian).
IMAGE_REPOSITORY    := $(shell awk '/^image:/ {f=1; next} /^[^ \t#]/ {f=0} f && $$1 == "repository:" {print $$2; exit}' charts/gatehouse/values.yaml)
IMAGE_TAG           ?= $(VERSION:v%=%)
IMAGE               ?= $(IMAGE_REPOSITORY):$(IMAGE_TAG)
IMAGE_ARCHIVE       ?= $(BIN)/gatehouse-image.tar
IMAGE_LISTING       ?= $(BIN)/gatehouse-image.contents.txt
IMAGE_SBOM          ?= $(BIN)/gatehouse-image.spdx.json
IMAGE_INDEX_ARCHIVE ?= $(BIN)/gatehouse-image.oci.tar
IMAGE_PLATFORMS     ?= linux/amd64 linux/arm64
DEB_CACHE           ?= $(BIN)/debs
PAUSE_IMAGE         ?= gatehouse.dev/pause:$(IMAGE_TAG)
PAUSE_IMAGE_ARCHIVE ?= $(BIN)/pause-image.tar
# SOURCE_DATE_EPOCH is every timestamp inside the images: the last commit's
# time, so that the same tree builds the same digests.
SOURCE_DATE_EPOCH   ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
IMAGE_PLATFORM      ?= linux/$(shell $(GO) env GOARCH)

KUBE_VERSION := v1.37.1
empty :=
space := $(empty) $(empty)
comma := ,
ETCD_VERSION := $(shell sed -n 's/^require go.etcd.io\/etcd\/server\/v3 //p' hack/tools/etcd/go.mod)
KUBE_LDFLAGS := -s -w -X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) \
	-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37

CONTROLLER_GEN := $(BIN)/controller-gen
CONVERSION_GEN := $(BIN)/conversion-gen
HELM           := $(BIN)/helm
PROMTOOL       := $(BIN)/promtool
METRICNAMES    := $(BIN)/metricnames
GOLANGCI_LINT  := $(BIN)/golangci-lint
COSIGN         := $(BIN)/cosign
# RUN_TOOLS are what make run starts, nothing else: a newcomer's first
# make run waits for these five and Gatehouse only. TOOLS adds what the
# tests, make generate and the alert checks use; each target that needs one
# depends on it alone.
KUBE_RUN_BINS := kube-apiserver kube-controller-manager kube-scheduler kubectl
RUN_TOOLS := $(BIN)/kube-apiserver $(BIN)/kube-controller-manager $(BIN)/kube-scheduler $(BIN)/etcd $(BIN)/kubectl
TOOLS     := $(RUN_TOOLS) $(BIN)/kubelet $(CONTROLLER_GEN) $(CONVERSION_GEN) $(HELM) $(PROMTOOL) $(METRICNAMES) $(COSIGN) $(BIN)/haproxy-3.0/usr/sbin/haproxy
# TEST_TOOLS are what make test runs: no test runs controller-gen or
# conversion-gen (make generate and verify-generated do), and cosign only
# signs in make test-ci's release test (.ci/run runs it after make test).
TEST_TOOLS := $(filter-out $(CONTROLLER_GEN) $(CONVERSION_GEN) $(COSIGN),$(TOOLS))
# KUBE_MINOR_TOOLS are the older minors' control planes the minor matrix
# runs (make tools-minors, make test-minors), built by make test as well.
KUBE_MINORS       := 1.33 1.34 1.35 1.36
# CI_KUBE_MINORS is the part of the matrix .ci/run runs (make test-ci): the
# lowest minor the previous chart supports (the install suite upgrades from
# it, test/install/release_test.go), 1.34; the reasons are at test-minors.
CI_KUBE_MINORS    := 1.34
KUBE_MINOR_BINS   := kube-apiserver kube-controller-manager kube-scheduler kubelet
KUBE_MINOR_TOOLS  := $(foreach m,$(KUBE_MINORS),$(addprefix $(BIN)/kube-$(m)/,$(KUBE_MINOR_BINS)))

# Progress: every build recipe starts with $(call step,$@,NAME,COLD-TIME),
# which prints "make: building NAME (2 of 6; about COLD-TIME cold on two
# cores)…". The count is over what this invocation builds: the goal's tools
# missing from bin/ and, for run, test and build, Gatehouse itself. go build
# prints nothing while it compiles, so without these lines a first make run
# sits silent for minutes. COLD-TIME was measured with empty Go caches
# (README's table).
STEP_TOOLS := $(if $(filter run,$(MAKECMDGOALS)),$(RUN_TOOLS),$(if $(filter test,$(MAKECMDGOALS)),$(TEST_TOOLS),$(if $(filter tools test-minors,$(MAKECMDGOALS)),$(TOOLS)))) \
	$(if $(filter test-ci,$(MAKECMDGOALS)),$(COSIGN) $(foreach m,$(CI_KUBE_MINORS),$(BIN)/kube-$(m)/kube-apiserver)) \
	$(if $(filter tools-minors test-minors,$(MAKECMDGOALS)),$(foreach m,$(KUBE_MINORS),$(BIN)/kube-$(m)/kube-apiserver))
STEPS      := $(filter-out $(wildcard $(STEP_TOOLS)) $(addprefix $(BIN)/,$(filter-out kube-apiserver,$(KUBE_RUN_BINS))),$(STEP_TOOLS)) $(if $(filter run test build,$(MAKECMDGOALS)),gatehouse) $(if $(filter run,$(MAKECMDGOALS)),devenv)
step_index  = $(strip $(foreach i,$(shell seq $(words $(STEPS))),$(if $(filter $1,$(word $i,$(STEPS))),$i)))
step        = @echo "make: building $2 ($(if $(call step_index,$1),$(call step_index,$1) of $(words $(STEPS)); )about $3 cold on two cores)…"

.PHONY: all
all: build

##@ Tools, built once from the pinned module versions in hack/tools/*/go.mod

.PHONY: tools
tools: $(TOOLS) ## Build every tool into bin/: what make run starts (kube-apiserver, kube-controller-manager, kube-scheduler, etcd, kubectl) and what the tests use (kubelet, controller-gen, conversion-gen, helm, promtool, metricnames, cosign).

.PHONY: run-tools
run-tools: $(RUN_TOOLS) ## Build only what make run starts.

# One go build makes the four 1.37 binaries make run starts (a grouped
# target: its recipe runs once for all of them; KUBE_RUN_BINS), as each
# minor's are made below: the linker of one runs while the others compile,
# where a build per binary left one core idle at each link. kubelet stays a
# build of its own: make run does not start it.
$(addprefix $(BIN)/,$(KUBE_RUN_BINS)) &: hack/tools/kube/go.mod hack/tools/kube/go.sum
	$(call step,$(BIN)/kube-apiserver,$(subst $(space),$(comma)$(space),$(KUBE_RUN_BINS)) $(KUBE_VERSION),13 min)
	cd hack/tools/kube && $(GO) build -trimpath -ldflags "$(KUBE_LDFLAGS)" -o $(BIN)/ $(addprefix k8s.io/kubernetes/cmd/,$(KUBE_RUN_BINS))

# The minor matrix (make test-minors, docs/testing.md): the control plane of
# each older tested minor, each from its own pinned module hack/tools/kube-<minor>,
# into bin/kube-<minor>/. internal/testing/testenv runs them when GATEHOUSE_KUBE_MINOR
# names the minor. Only what the tests start: the API server, the controller
# manager (namespace deletion, garbage collection), the scheduler and the
# real node's kubelet (neither may be newer than the API server); etcd and
# kubectl stay 1.37's (every minor supports etcd 3.5 and 3.6).
# kube_version is the k8s.io/kubernetes version hack/tools/kube-<minor> pins.
kube_version = $(shell sed -n 's/^require k8s.io\/kubernetes //p' hack/tools/kube-$1/go.mod)
kube_ldflags = -s -w -X k8s.io/component-base/version.gitVersion=$(call kube_version,$1) \
	-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(word 2,$(subst ., ,$1))

.PHONY: tools-minors
tools-minors: $(KUBE_MINOR_TOOLS) ## Build the control plane of every older tested minor (1.33-1.36: kube-apiserver, kube-controller-manager, kube-scheduler, kubelet) into bin/kube-<minor>/.

# One go build per minor makes all four (a pattern rule with several
# targets runs once for them): the linker of one runs while the others
# compile, which a build per binary would leave one core idle for.
$(addprefix $(BIN)/kube-%/,$(KUBE_MINOR_BINS)): hack/tools/kube-%/go.mod hack/tools/kube-%/go.sum
	$(call step,$(BIN)/kube-$*/kube-apiserver,Kubernetes $(call kube_version,$*) ($(KUBE_MINOR_BINS)),15 min)
	mkdir -p $(BIN)/kube-$*
	cd hack/tools/kube-$* && $(GO) build -trimpath -ldflags "$(call kube_ldflags,$*)" -o $(BIN)/kube-$*/ $(addprefix k8s.io/kubernetes/cmd/,$(KUBE_MINOR_BINS))

# kubelet runs the real node (testenv RealNode, make run REAL_NODE=1) with
# Debian's containerd, runc and CNI plugins: docs/real-node.md.
$(BIN)/kubelet: hack/tools/kube/go.mod hack/tools/kube/go.sum
	$(call step,$@,kubelet $(KUBE_VERSION),45 s)
	cd hack/tools/kube && $(GO) build -trimpath -ldflags "$(KUBE_LDFLAGS)" -o $@ k8s.io/kubernetes/cmd/kubelet

# HAPROXY_ROOT holds the image's haproxy (Debian 13's 3.0, pinned in
# hack/image/debian/<arch>.lock) with every library it loads, unpacked as
# the image has them: the tests run it through its own loader
# (haproxy.RunnerOptions.Root), since this machine's glibc may be older than
# Debian 13's. The machine's own haproxy (Debian 12's 2.6, hack/deps.sh) is
# the other branch the tests run.
HAPROXY_ROOT := $(BIN)/haproxy-3.0
$(HAPROXY_ROOT)/usr/sbin/haproxy: hack/image/debian/amd64.lock hack/image/debian/arm64.lock
	$(call step,$@,haproxy 3.0 from hack/image/debian's packages,10 s)
	rm -rf $(HAPROXY_ROOT)
	$(GO) run ./hack/image --deb-lock=hack/image/debian --deb=haproxy:/usr/sbin/haproxy --ca-bundle=/etc/ssl/certs/ca-certificates.crt --deb-cache=$(DEB_CACHE) --rootfs=$(HAPROXY_ROOT)

$(BIN)/etcd: hack/tools/etcd/go.mod hack/tools/etcd/go.sum
	$(call step,$@,etcd $(ETCD_VERSION),1 min)
	cd hack/tools/etcd && $(GO) build -trimpath -ldflags "-s -w" -o $@ go.etcd.io/etcd/server/v3

$(CONTROLLER_GEN): hack/tools/controller-gen/go.mod hack/tools/controller-gen/go.sum
	$(call step,$@,controller-gen,30 s)
	cd hack/tools/controller-gen && $(GO) build -o $@ sigs.k8s.io/controller-tools/cmd/controller-gen

$(CONVERSION_GEN): hack/tools/conversion-gen/go.mod hack/tools/conversion-gen/go.sum
	$(call step,$@,conversion-gen,10 s)
	cd hack/tools/conversion-gen && $(GO) build -o $@ k8s.io/code-generator/cmd/conversion-gen

$(HELM): hack/tools/helm/go.mod hack/tools/helm/go.sum
	$(call step,$@,helm,2 min)
	# As helm's own release build: its default Kubernetes version (helm
	# template, lint) is the client-go it is built with, not 1.20.
	cd hack/tools/helm && minor=$$($(GO) list -m -f '{{.Version}}' k8s.io/client-go | cut -d. -f2) && \
	$(GO) build -trimpath -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$$($(GO) list -m -f '{{.Version}}' helm.sh/helm/v3) \
		-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$$minor \
		-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$$minor" -o $@ helm.sh/helm/v3/cmd/helm

# promtool checks and unit-tests the chart's alerts (make test-alerts);
# metricnames, built from the same pinned Prometheus, lists the metrics the
# alerts and the dashboard query for the e2e metric-existence test.
# remove_all_sd is Prometheus's own build tag that leaves out its service
# discoveries but file and HTTP: check rules and test rules use none, and
# they are more than half of promtool's source to compile (the AWS, Azure,
# GCE, OCI, OpenStack... SDKs: 143 MB of Go files, 63 MB without).
$(PROMTOOL): hack/tools/promtool/go.mod hack/tools/promtool/go.sum
	$(call step,$@,promtool,3 min)
	cd hack/tools/promtool && $(GO) build -trimpath -tags remove_all_sd -ldflags "-s -w -X github.com/prometheus/common/version.Version=$$($(GO) list -m -f '{{.Version}}' github.com/prometheus/prometheus)" \
		-o $@ github.com/prometheus/prometheus/cmd/promtool

$(METRICNAMES): hack/tools/promtool/go.mod hack/tools/promtool/go.sum hack/tools/promtool/metricnames/main.go
	$(call step,$@,metricnames,5 s)
	cd hack/tools/promtool && $(GO) build -trimpath -o $@ ./metricnames

# cosign signs releases and attests their SBOM (release.yml); hack/image's
# test signs and verifies the image index with it offline.
$(COSIGN): hack/tools/cosign/go.mod hack/tools/cosign/go.sum
	$(call step,$@,cosign,8 min)
	cd hack/tools/cosign && $(GO) build -trimpath -ldflags "-s -w -X sigs.k8s.io/release-utils/version.gitVersion=$$($(GO) list -m -f '{{.Version}}' github.com/sigstore/cosign/v2)" \
		-o $@ github.com/sigstore/cosign/v2/cmd/cosign

# golangci-lint is not in TOOLS: only make lint needs it. Its version is
# linked in as its own release build does (golangci-lint version).
$(GOLANGCI_LINT): hack/tools/golangci-lint/go.mod hack/tools/golangci-lint/go.sum
	$(call step,$@,golangci-lint,3 min)
	cd hack/tools/golangci-lint && $(GO) build -trimpath -ldflags "-s -w -X main.version=$$($(GO) list -m -f '{{.Version}}' github.com/golangci/golangci-lint/v2 | sed 's/^v//')" \
		-o $@ github.com/golangci/golangci-lint/v2/cmd/golangci-lint

##@ Build

.PHONY: build
build: ## Build bin/gatehouse (static, as the image's: GO_STATIC).
	$(call step,gatehouse,gatehouse $(VERSION),4 min)
	$(GO_STATIC) build $(IMAGE_GOFLAGS) -ldflags "-X github.com/gatehouse-dev/gatehouse/internal/version.Version=$(VERSION)" -o $(BIN)/gatehouse ./cmd/gatehouse

# The images' binaries are static (CGO_ENABLED=0: nothing in Gatehouse
# needs cgo, and a static binary needs no library of the image) and
# reproducible (-trimpath; -buildvcs stamps the revision).
IMAGE_GOFLAGS := -trimpath -buildvcs=auto
# GO_STATIC is go in the image's configuration (CGO_ENABLED=0; with
# IMAGE_GOFLAGS' -trimpath for builds, GO_TEST_FLAGS for tests). make build,
# the e2e, chaos and install suites, the image and make run's launcher all
# compile in it,
# so Gatehouse and its dependencies are compiled once for all of them (a
# configuration is a cache key of every package: cgo changes net, -trimpath
# every file name) and the image's binary is a link. Only the unit stage
# compiles in another, the race detector's, which needs cgo; vet runs in
# that one (go vet -race): it compiles every package's tests, which the
# unit stage then links, where in the static configuration that compile
# served nothing else (about 2 minutes cold).
GO_STATIC     := env CGO_ENABLED=0 $(GO)
GO_TEST_FLAGS := -trimpath
# TEST_SUMMARY runs `go test -json` and prints it as go test does (-v, or
# without it with -quiet), then each failed test's last lines again at the
# end (hack/testsummary): a failed step's clean-up (the install suite dumps
# its Pods' logs) or the packages after a failed one no longer end the log.
# Its status is go test's.
TEST_SUMMARY  := $(BIN)/testsummary
IMAGE_BUILD   := $(BIN)/image

$(TEST_SUMMARY): hack/testsummary/main.go
	@mkdir -p $(@D)
	$(GO) build -o $@ ./hack/testsummary

.PHONY: image
image: pause-image ## Build the Gatehouse image (an index of IMAGE_PLATFORMS, and IMAGE_PLATFORM's alone) and the pause image as OCI archives in bin/ (see IMAGE, IMAGE_ARCHIVE, IMAGE_INDEX_ARCHIVE, IMAGE_LISTING, IMAGE_SBOM).
	for p in $(IMAGE_PLATFORMS); do \
		CGO_ENABLED=0 GOOS=$${p%%/*} GOARCH=$${p#*/} $(GO) build $(IMAGE_GOFLAGS) -ldflags "-s -w -X github.com/gatehouse-dev/gatehouse/internal/version.Version=$(VERSION)" \
			-o $(IMAGE_BUILD)/$${p#*/}/gatehouse ./cmd/gatehouse || exit 1; \
	done
	$(GO) run ./hack/image @hack/image/gatehouse.args --file=/usr/local/bin/gatehouse=$(IMAGE_BUILD)/{arch}/gatehouse --deb-cache=$(DEB_CACHE) \
		--label=org.opencontainers.image.version=$(VERSION) \
		--label=org.opencontainers.image.revision=$$(git rev-parse HEAD 2>/dev/null || echo unknown) \
		--ref=$(IMAGE) $(addprefix --platform=,$(IMAGE_PLATFORMS)) --output-platform=$(IMAGE_PLATFORM) --epoch=$(SOURCE_DATE_EPOCH) \
		--output=$(IMAGE_ARCHIVE) --index-output=$(IMAGE_INDEX_ARCHIVE) --listing=$(IMAGE_LISTING) --sbom=$(IMAGE_SBOM)

.PHONY: local-image
local-image: ## make image for this machine's platform alone (IMAGE_PLATFORM): what the local real node imports (make test-install, make run REAL_NODE=1).
	$(MAKE) image IMAGE_PLATFORMS=$(IMAGE_PLATFORM)

.PHONY: image-lock
image-lock: ## Pin haproxy, the CA bundle and the libraries they load to the newest Debian bookworm packages: rewrites hack/image/debian/<arch>.lock (needs gpgv and debian-archive-keyring).
	$(GO) run ./hack/image lock @hack/image/gatehouse.args --deb-cache=$(DEB_CACHE) $(addprefix --platform=,$(IMAGE_PLATFORMS))

# CRANE is the pinned registry client (go-containerregistry, already a
# requirement) for the steps that need a registry.
CRANE := github.com/google/go-containerregistry/cmd/crane@v0.22.1

.PHONY: pin-dockerfile
pin-dockerfile: ## Pin the Dockerfile's Go base image (ARG GOLANG_IMAGE) by the digest its tag has now: needs a reachable registry.
	tag="$$(sed -n 's/^ARG GOLANG_IMAGE=\([^@]*\).*/\1/p' Dockerfile)" && \
	digest="$$($(GO) run $(CRANE) digest "$$tag")" && \
	sed -i "s|^ARG GOLANG_IMAGE=.*|ARG GOLANG_IMAGE=$$tag@$$digest|" Dockerfile && \
	grep '^ARG GOLANG_IMAGE=' Dockerfile

.PHONY: print-image
print-image: ## Print IMAGE, the reference make image tags (the release workflow pushes it).
	@echo $(IMAGE)

.PHONY: pause-image
pause-image: ## Build the sandbox (pause) image for the local real node: $(PAUSE_IMAGE_ARCHIVE), named PAUSE_IMAGE.
	CGO_ENABLED=0 GOOS=linux $(GO) build $(IMAGE_GOFLAGS) -ldflags "-s -w" -o $(IMAGE_BUILD)/pause ./hack/pause
	$(GO) run ./hack/image --file=/pause=$(IMAGE_BUILD)/pause --entrypoint=/pause --user=pause:65535 \
		--label=org.opencontainers.image.source=https://github.com/gatehouse-dev/gatehouse --label=org.opencontainers.image.licenses=Apache-2.0 \
		--ref=$(PAUSE_IMAGE) --platform=$(IMAGE_PLATFORM) --epoch=$(SOURCE_DATE_EPOCH) --output=$(PAUSE_IMAGE_ARCHIVE)

# RBAC_SOURCES are the core (internal/app) and the modules (internal/<name>):
# controller-gen reads each alone, so that config/rbac/<name>/role.yaml holds
# exactly the rules that one needs, and the chart renders only the enabled
# modules'. internal/manifests' tests fail on a marker elsewhere.
RBAC_SOURCES := core configcheck nodegroup placement pvsafe

.PHONY: generate
# CRD_API_PATHS are the API groups whose CRDs Gatehouse ships; haptic's
# haproxy-haptic.org types are read, never installed (haptic's chart owns
# that CRD), so none is generated for them.
CRD_API_PATHS := ./api/gatehouse.dev/... ./api/deckhouse.io/... ./api/cozystack.io/...

generate: $(CONTROLLER_GEN) $(CONVERSION_GEN) ## Generate deepcopy code, CRDs and RBAC with controller-gen, conversions with conversion-gen.
	$(CONTROLLER_GEN) object paths=./api/...
	$(CONVERSION_GEN) --output-file zz_generated.conversion.go --go-header-file /dev/null ./api/...
	$(CONTROLLER_GEN) crd paths="{$(subst $(space),$(comma),$(CRD_API_PATHS))}" output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) crd paths=github.com/fluxcd/helm-controller/api/v2 output:crd:artifacts:config=config/crd/external
	rm -f config/rbac/role.yaml $(foreach name,$(RBAC_SOURCES),config/rbac/$(name)/role.yaml)
	for name in $(RBAC_SOURCES); do \
		pkg=internal/$$name; [ $$name = core ] && pkg=internal/app; \
		$(CONTROLLER_GEN) rbac:roleName=gatehouse-$$name paths=./$$pkg/... output:rbac:artifacts:config=config/rbac/$$name || exit 1; \
	done
	$(GO) run ./hack/manifests

.PHONY: verify-generated
verify-generated: generate ## Fail when generated files or go.mod are out of date.
	$(GO) mod tidy
	@git diff --exit-code -- api config charts go.mod go.sum || { echo "generated files or go.mod are stale: run make generate and go mod tidy, and commit"; exit 1; }

##@ Release

# make release writes a release into DIST (hack/release): the CLI archives
# for RELEASE_PLATFORMS, the chart packaged (version and appVersion the
# release's), the image index of IMAGE_PLATFORMS with its SBOM and listing,
# an SLSA provenance statement of all of it, and checksums.txt signed with
# cosign's RELEASE_KEY (made with an empty password when missing; the
# public key lands in DIST as cosign.pub). make publish pushes DIST's image
# to REGISTRY/gatehouse and its chart to oci://REGISTRY/charts/gatehouse
# and signs both with the same key, attesting the provenance and the SBOM
# on the image. PLAIN_HTTP=1 talks to the registry without TLS (the default
# for one on loopback). docs/releasing.md says how to verify and install.
DIST              ?= $(CURDIR)/dist
# On darwin configcheck's checks cannot run (Linux confinement) and the CLI
# says so. make test-release (CI) builds CI_RELEASE_PLATFORMS only: the
# darwin compiles are two more builds of everything, for archives no test
# can run here.
RELEASE_PLATFORMS    ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
CI_RELEASE_PLATFORMS := linux/amd64 linux/arm64
RELEASE_KEY       ?= $(BIN)/release-key/cosign.key
# RELEASE_KEYLESS_IDENTITY, when set, signs keyless instead of with
# RELEASE_KEY: cosign's ambient OIDC token (the release workflow's), the
# identity verifiers demand (the workflow's URI at its ref), and
# RELEASE_KEYLESS_ISSUER the token's issuer.
RELEASE_KEYLESS_IDENTITY ?=
RELEASE_KEYLESS_ISSUER   ?= $(if $(RELEASE_KEYLESS_IDENTITY),https://token.actions.githubusercontent.com)
RELEASE_SIGNING = $(if $(RELEASE_KEYLESS_IDENTITY),--keyless-identity $(RELEASE_KEYLESS_IDENTITY) --keyless-issuer $(RELEASE_KEYLESS_ISSUER),--key $(RELEASE_KEY))
RELEASE_BUILD     := $(BIN)/release-build
REGISTRY          ?=
PLAIN_HTTP        ?= $(if $(filter localhost:% 127.%,$(REGISTRY)),1,)
RELEASE_BUILDER   ?=

.PHONY: release
release: $(COSIGN) $(HELM) ## Build a release into DIST: make release VERSION=v0.2.0 (CLI archives, chart, image index, SBOM, provenance, checksums signed with RELEASE_KEY).
	@[[ "$(VERSION)" =~ ^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$$ ]] || { echo "make release: VERSION=$(VERSION): want vMAJOR.MINOR.PATCH[-PRERELEASE]"; exit 2; }
	rm -rf $(RELEASE_BUILD) && mkdir -p $(RELEASE_BUILD)
	for p in $(RELEASE_PLATFORMS); do \
		CGO_ENABLED=0 GOOS=$${p%%/*} GOARCH=$${p#*/} $(GO) build $(IMAGE_GOFLAGS) -ldflags "-s -w -X github.com/gatehouse-dev/gatehouse/internal/version.Version=$(VERSION)" \
			-o $(RELEASE_BUILD)/$${p%%/*}_$${p#*/}/gatehouse ./cmd/gatehouse || exit 1; \
	done
	$(MAKE) --no-print-directory image VERSION=$(VERSION) IMAGE_ARCHIVE=$(RELEASE_BUILD)/image.tar IMAGE_INDEX_ARCHIVE=$(RELEASE_BUILD)/image.oci.tar \
		IMAGE_LISTING=$(RELEASE_BUILD)/image.contents.txt IMAGE_SBOM=$(RELEASE_BUILD)/image.spdx.json
	$(HELM) package charts/gatehouse --version $(VERSION:v%=%) --app-version $(VERSION:v%=%) --destination $(RELEASE_BUILD)/chart
	@[ -n "$(RELEASE_KEYLESS_IDENTITY)" ] || [ -f $(RELEASE_KEY) ] || { echo "make release: no RELEASE_KEY; making one at $(RELEASE_KEY) (empty password)"; \
		mkdir -p $(dir $(RELEASE_KEY)) && cd $(dir $(RELEASE_KEY)) && COSIGN_PASSWORD= $(COSIGN) generate-key-pair --output-key-prefix $(basename $(notdir $(RELEASE_KEY))); }
	$(GO) run ./hack/release dist --version $(VERSION) --dist $(DIST) \
		$(foreach p,$(RELEASE_PLATFORMS),--binary=$(p)=$(RELEASE_BUILD)/$(subst /,_,$(p))/gatehouse) --include LICENSE --include README.md \
		--image-index $(RELEASE_BUILD)/image.oci.tar --sbom $(RELEASE_BUILD)/image.spdx.json --listing $(RELEASE_BUILD)/image.contents.txt \
		--chart $(RELEASE_BUILD)/chart/gatehouse-$(VERSION:v%=%).tgz --epoch $(SOURCE_DATE_EPOCH) \
		--revision $$(git rev-parse HEAD) $$([ -z "$$(git status --porcelain --untracked-files=no)" ] || echo --modified) \
		--go-version $$($(GO) env GOVERSION) $(if $(RELEASE_BUILDER),--builder-id $(RELEASE_BUILDER)) \
		--dependency=file:go.sum=go.sum $(foreach p,$(IMAGE_PLATFORMS),--dependency=file:hack/image/debian/$(notdir $(p)).lock=hack/image/debian/$(notdir $(p)).lock) \
		--cosign $(COSIGN) $(RELEASE_SIGNING)

.PHONY: publish
publish: $(COSIGN) $(HELM) ## Push DIST's release to REGISTRY and sign it there: make publish REGISTRY=registry.example/platform (image REGISTRY/gatehouse, chart oci://REGISTRY/charts/gatehouse).
	@[ -n "$(REGISTRY)" ] || { echo "make publish: REGISTRY=host[:port]/path is required"; exit 2; }
	$(GO) run ./hack/release publish --version $(VERSION) --dist $(DIST) --registry $(REGISTRY) $(if $(PLAIN_HTTP),--plain-http) \
		--cosign $(COSIGN) --helm $(HELM) $(RELEASE_SIGNING)

##@ Test

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint with .golangci.yml (builds the pinned golangci-lint into bin/ first).
	$(GOLANGCI_LINT) run ./...

# The Debian packages a target needs (hack/deps.sh holds the list): as root
# they are installed, otherwise make stops at once with the one command to
# run. With everything there this is a few lookups on PATH.
.PHONY: deps
deps: ## Install the Debian packages make test needs (as root; otherwise print the apt-get command): haproxy, containerd, runc, CNI plugins, nftables, iproute2, qemu-user-static, build-essential, git.
	@hack/deps.sh test

.PHONY: deps-run
deps-run: ## The same for make run: haproxy (and the real node's packages with REAL_NODE=1).
	@hack/deps.sh run $(if $(filter 1,$(REAL_NODE)),real-node)

# make test's stages are timed (hack/stage.sh): the table of where the run's
# time went is printed at its end, or at the stage that failed. Each tool
# make would build is a stage of its own (a sub-make, told STEPS so that its
# "building N of M" line counts as this make's); the image is built once, for
# the install suite (IMAGE_READY).
STAGES_FILE := $(BIN)/make-test-stages.txt
STAGE       := STAGES_FILE=$(STAGES_FILE) hack/stage.sh
timed_build  = $(foreach t,$1,$(MAKE) -q $t 2>/dev/null || $(STAGE) 'build $(if $(filter $(BIN)/kube-apiserver,$t),$(KUBE_RUN_BINS),$(t:$(BIN)/%=%))' -- $(MAKE) --no-print-directory STEPS='$(STEPS)' $t || exit $$?;)

.PHONY: test
test: deps $(TEST_SUMMARY) ## Unit tests (race detector), the alerts' promtool tests, integration tests against a real kube-apiserver, the example suites, then the install suite on a real node; prints each stage's time at the end. .ci/run adds make test-ci.
	@$(STAGE) --reset
	@+$(call timed_build,$(TEST_TOOLS))
	@$(STAGE) 'build gatehouse' -- $(MAKE) --no-print-directory STEPS='$(STEPS)' build
	$(STAGE) 'alerts (promtool)' -- $(MAKE) --no-print-directory test-alerts
	$(STAGE) vet -- $(GO) vet -race ./...
	$(STAGE) 'hack scripts (fuzz, deps, stage)' -- bash -c 'hack/fuzz_test.sh && hack/deps_test.sh && hack/stage_test.sh'
	$(STAGE) 'unit (race)' -- $(TEST_SUMMARY) -quiet $(GO) test -json -race -count=1 -timeout $(UNIT_TIMEOUT) $$($(GO) list ./... | grep -v -e /test/ -e /hack/image)
	$(STAGE) "haptic's chart config (no race)" -- $(TEST_SUMMARY) -quiet $(GO) test -json -count=1 -timeout 10m -run '^TestHaptic(ChartTests|TenantSnippet|SlotPreservation)' ./internal/configcheck/
	$(STAGE) 'image tests (hack/image)' -- $(TEST_SUMMARY) -quiet $(GO) test -json -count=1 -timeout 15m ./hack/image/
	$(STAGE) 'e2e and chaos' -- $(TEST_SUMMARY) -quiet $(GO_STATIC) test $(GO_TEST_FLAGS) -json -count=1 -shuffle=on -timeout 30m $$($(GO) list ./test/... | grep -v /test/install)
	$(STAGE) examples -- $(MAKE) --no-print-directory test-examples
	$(STAGE) 'image ($(IMAGE_PLATFORM))' -- $(MAKE) --no-print-directory local-image
	$(STAGE) 'install suite' -- $(MAKE) --no-print-directory test-install IMAGE_READY=1
	@$(STAGE) --report

# make test-ci is what .ci/run runs after make test: the suites that guard
# the release's other parts and cost minutes of builds a developer's loop
# need not pay (issue 36: make test within 20 minutes warm, 45 cold). Each
# is timed as make test's stages are, in a table of its own.
# - the release's signing: hack/image's TestCosignSignsAndVerifiesTheIndex
#   (build tag release) signs and attests the image index with the pinned
#   cosign and verifies it as a user would; cosign is about 8 minutes to
#   build cold, for this test alone;
# - the image's other architecture under emulation (test-emulated): about
#   9 minutes cold, a second compile of Gatehouse for FOREIGN_ARCH;
# - the lowest tested minor (CI_KUBE_MINORS): its e2e subset and install
#   suite (test-minors), about 12.5 minutes cold to build its control plane.
CI_STAGES_FILE := $(BIN)/make-test-ci-stages.txt
CI_STAGE       := STAGES_FILE=$(CI_STAGES_FILE) hack/stage.sh

.PHONY: test-ci
test-ci: deps ## What .ci/run runs after make test: the release's signing (cosign), the other architecture under emulation (test-emulated) and 1.34's e2e subset and install suite (test-minors); prints each stage's time.
	@$(CI_STAGE) --reset
	@$(MAKE) -q $(COSIGN) 2>/dev/null || $(CI_STAGE) 'build cosign' -- $(MAKE) --no-print-directory STEPS='$(STEPS)' $(COSIGN)
	$(CI_STAGE) 'release (cosign signing; make release twice)' -- $(MAKE) --no-print-directory test-release
	$(CI_STAGE) 'emulated ($(FOREIGN_ARCH))' -- $(MAKE) --no-print-directory test-emulated
	@$(MAKE) -q $(foreach m,$(CI_KUBE_MINORS),$(addprefix $(BIN)/kube-$m/,$(KUBE_MINOR_BINS))) 2>/dev/null || \
		$(CI_STAGE) 'build Kubernetes $(CI_KUBE_MINORS) (tools-minors)' -- $(MAKE) --no-print-directory STEPS='$(STEPS)' tools-minors KUBE_MINORS='$(CI_KUBE_MINORS)'
	$(CI_STAGE) 'minors ($(CI_KUBE_MINORS): e2e subset, install from the release)' -- $(MAKE) --no-print-directory test-minors KUBE_MINORS='$(CI_KUBE_MINORS)' MINOR_INSTALL='$(CI_MINOR_INSTALL)' INSTALL_RELEASE_DIST=$(RELEASE_TEST_DIST)
	@$(CI_STAGE) --report

.PHONY: tools-ci
# .ci/run starts this in the background at the lowest priority before
# make lint and make test: its compiles then use the CPU they leave idle
# (downloads, links, tests waiting on a control plane or the real node),
# and make test-ci finds them done. Each is what make test-ci would build
# first: cosign, the lowest minor's control plane, and the other
# architecture's Gatehouse and sandbox tests (test-emulated links them
# again from the cache).
tools-ci: $(COSIGN) ## Build what make test-ci needs beyond make test: cosign, Kubernetes CI_KUBE_MINORS' control plane, the FOREIGN_ARCH compiles of test-emulated.
	@$(MAKE) --no-print-directory tools-minors KUBE_MINORS='$(CI_KUBE_MINORS)'
	CGO_ENABLED=0 GOOS=linux GOARCH=$(FOREIGN_ARCH) $(GO) build $(IMAGE_GOFLAGS) -ldflags "-s -w -X github.com/gatehouse-dev/gatehouse/internal/version.Version=$(VERSION)" \
		-o $(IMAGE_BUILD)/$(FOREIGN_ARCH)/gatehouse ./cmd/gatehouse
	CGO_ENABLED=0 GOOS=linux GOARCH=$(FOREIGN_ARCH) $(GO) test -c -o $(IMAGE_BUILD)/$(FOREIGN_ARCH)/sandbox.test ./internal/sandbox/

.PHONY: test-release
# RELEASE_TEST_DIST keeps the first of test-release's two make release
# builds: make test-ci's install suite on the lowest minor publishes it to a
# registry on loopback and installs from there (INSTALL_RELEASE_DIST).
RELEASE_TEST_DIST := $(BIN)/release-test-dist
test-release: $(COSIGN) $(HELM) ## The release played offline: hack/image's tests with the release build tag (cosign signs, attests and verifies the image index in a registry on loopback), then make release twice, every file the same (RELEASE_TEST_DIST keeps the first).
	COSIGN=$(COSIGN) $(GO) test -tags release -count=1 -timeout 15m ./hack/image/
	RELEASE_TEST_DIST=$(RELEASE_TEST_DIST) RELEASE_PLATFORMS='$(CI_RELEASE_PLATFORMS)' $(GO) test -tags release -count=1 -timeout 20m -run '^TestReleaseIsReproducible$$' ./hack/release/

# UNIT_TIMEOUT bounds each package of the unit stage (go test's default is
# 10 minutes, which a cold, busy machine's first run went past: issue 36).
# hack/image runs in a stage of its own, without the race detector: it
# starts no goroutine of its own, and its tests build the real image (the
# pinned packages unpacked from xz, layers compressed at gzip's best level)
# in pure computation the race detector slowed twelvefold (4.1 min of CPU
# against 21 s, docs/testing.md); on a cold, busy machine that package
# alone went past the 10 minutes.
UNIT_TIMEOUT ?= 25m

# IMAGE_READY=1: the caller (make test) built IMAGE_ARCHIVE already in this
# run, so test-install and test-minors do not build it again.
IMAGE_READY ?=

# GATEHOUSE is the binary test-examples runs.
GATEHOUSE ?= $(BIN)/gatehouse

.PHONY: test-examples
test-examples: build ## Run the example suites, examples/*/suite.yaml, with gatehouse test (docs/testing-policies.md).
	$(GATEHOUSE) test $(addprefix -f ,$(wildcard examples/*/suite.yaml))

# FOREIGN_ARCH is the image's other architecture (arm64 on an amd64
# machine, amd64 on an arm64 one); QEMU_USER its static emulator
# (Debian's qemu-user-static).
FOREIGN_ARCH := $(if $(filter arm64,$(shell $(GO) env GOARCH)),amd64,arm64)
QEMU_USER    := /usr/bin/qemu-$(if $(filter arm64,$(FOREIGN_ARCH)),aarch64,x86_64)-static

.PHONY: test-emulated
# What runs of the other architecture's Gatehouse under emulation: its
# version and the example suites that need no sandbox. configcheck's suite
# is left out: its checks run confined, and qemu-user neither installs a
# seccomp filter nor starts the confined re-execution of its own binary
# (docs/testing.md, "The other architecture").
test-emulated: ## Cross-compile Gatehouse for the image's other architecture (FOREIGN_ARCH) and run its version, the example suites but configcheck's and the sandbox's seccomp table tests under qemu-user (needs qemu-user-static).
	@[ -x $(QEMU_USER) ] || { echo "make: test-emulated needs $(QEMU_USER): sudo apt-get install qemu-user-static (.ci/run installs it)"; exit 1; }
	CGO_ENABLED=0 GOOS=linux GOARCH=$(FOREIGN_ARCH) $(GO) build $(IMAGE_GOFLAGS) -ldflags "-s -w -X github.com/gatehouse-dev/gatehouse/internal/version.Version=$(VERSION)" \
		-o $(IMAGE_BUILD)/$(FOREIGN_ARCH)/gatehouse ./cmd/gatehouse
	set -o pipefail; $(QEMU_USER) $(IMAGE_BUILD)/$(FOREIGN_ARCH)/gatehouse version | grep -F 'gatehouse $(VERSION) '
	$(QEMU_USER) $(IMAGE_BUILD)/$(FOREIGN_ARCH)/gatehouse test $(addprefix -f ,$(filter-out examples/configcheck/%,$(wildcard examples/*/suite.yaml)))
	@# The sandbox's seccomp table of that architecture against its x/sys
	@# numbers, and its filter in the BPF machine, as that build sees them.
	CGO_ENABLED=0 GOOS=linux GOARCH=$(FOREIGN_ARCH) $(GO) test -c -o $(IMAGE_BUILD)/$(FOREIGN_ARCH)/sandbox.test ./internal/sandbox/
	@# Both must have run and passed: a renamed test would match nothing.
	$(QEMU_USER) $(IMAGE_BUILD)/$(FOREIGN_ARCH)/sandbox.test -test.count=1 -test.run '^(TestSeccompTableMatchesXSys|TestSeccompProgram)$$' -test.v \
		> $(IMAGE_BUILD)/$(FOREIGN_ARCH)/sandbox.out; status=$$?; grep -E '^--- ' $(IMAGE_BUILD)/$(FOREIGN_ARCH)/sandbox.out; \
		[ $$status = 0 ] && [ "$$(grep -cE '^--- PASS: (TestSeccompTableMatchesXSys|TestSeccompProgram) ' $(IMAGE_BUILD)/$(FOREIGN_ARCH)/sandbox.out)" = 2 ]

.PHONY: test-alerts
test-alerts: $(PROMTOOL) ## Check the chart's alert rules (charts/gatehouse/files/alerts.yaml) and run their promtool unit tests (test/monitoring).
	$(PROMTOOL) check rules --lint-fatal charts/gatehouse/files/alerts.yaml
	$(PROMTOOL) test rules test/monitoring/alerts_test.yaml

.PHONY: test-install
# The install suite runs alone (not beside the e2e tests): it starts three
# Gatehouse Pods on the real node and measures admissions under load. It
# imports IMAGE_ARCHIVE, so only this machine's platform is built for it
# (hack/image's tests build every platform's layers).
test-install: $(TEST_TOOLS) $(TEST_SUMMARY) $(if $(IMAGE_READY),,local-image) ## The chart installed, killed, drained, upgraded and uninstalled on a real node (kubelet, containerd) under load: docs/install.md.
	$(TEST_SUMMARY) $(GO_STATIC) test $(GO_TEST_FLAGS) -json -count=1 -timeout 30m ./test/install/

# The minor matrix: each older tested minor (KUBE_MINORS) runs the part of
# the e2e suite where Gatehouse meets the API server and the controllers,
# which is what differs between minors, and the install suite; 1.37 runs
# everything above. MINOR_E2E, by reason (docs/testing.md):
# - the minor's own control plane: namespaces terminate, GC, scheduling;
# - the server contract through its API server: TLS, the client certificate,
#   excluded namespaces, warnings, the audit annotation;
# - webhook configurations written and repaired on it: runtime add/remove,
#   drift, labels, module settings, and the conversion stanza uninstall
#   resets;
# - each module's webhook path: NodeGroup conversion between every version
#   (and its CRD's CEL rules), pvsafe's DELETE refusal with the namespace
#   controller's cascade and the bypass's SubjectAccessReview, placement's
#   Pod, release, class and allow-list checks (its matchConditions' CEL on
#   object, oldObject and request), its lineage labels (a mutating webhook)
#   and the AffinityClass CEL rules, configcheck's admission and its
#   authorization;
# - reports on its discovery (OpenReports where served) and the chart's
#   RBAC on its authorizer.
MINOR_E2E := TestControlPlane.* \
	TestValidateHoldsTheSeedsServerContract TestAPIServerCallsGatehouseOverTLS TestWebhooksNeverInterceptExcludedNamespaces \
	TestWarnModeAdmitsAndRelaysTheDenialAsWarnings TestTheAuditLogRecordsTheDenialsReason \
	TestRuntimeWebhooksAreAddedAndRemovedWithoutRestart TestWebhookConfigurationDriftIsRepaired \
	TestWebhookConfigurationLabelsAreKeptByTheDriftRepair TestModuleWebhookSettingsAreKeptByTheDriftRepair \
	TestUninstallResetsItsConversionAndLeavesOthers \
	TestNodeGroupWrittenThroughV1alpha1IsReadThroughEveryVersion TestNodeGroupWrittenThroughV1IsReadThroughOlderVersions \
	TestNodeGroupV1OnlyFieldsSurviveReadModifyWriteThroughOlderVersions TestNodeGroupForgedConversionDataCannotStoreDocker \
	TestNodeGroupChecksDenyThroughTheAPI TestNodeGroupSchemaRules \
	TestPVSafeClaimDecisions TestPVSafeNamespaceWithSeveralRiskyClaimsAndTheBypassCascade TestPVSafeStatefulSetThatDeletesItsClaims \
	TestPVSafeBypassByAnEditTenantNeedsThePermission \
	TestPlacementPodBoundToANodeOutsideItsClassIsRefused TestPlacementRefusesAClassTheTenantMayNotUse \
	TestPlacementReleaseGetsItsClassAndPodsAreCheckedThroughTheLineage TestAffinityClassValidation \
	TestPlacementApplicationLabelCannotBeRemoved TestPlacementTenantCannotChangeItsOwnAllowList TestPlacementLineageLabels \
	TestConfigcheckAdmission TestConfigcheckAuthz \
	TestReportsMoveToOpenReportsWhereServed TestGatehouseRunsOnTheChartsRBAC
# MINOR_INSTALL is the install suite's part each older minor runs: all of
# it (empty: none).
MINOR_INSTALL := .*
# INSTALL_RELEASE_DIST, when set, is a directory make release wrote: the
# install suite publishes it to a registry on loopback (make publish) and
# installs the chart and image from there (make test-ci sets it).
INSTALL_RELEASE_DIST ?=
# CI_KUBE_MINORS (defined with KUBE_MINORS) and CI_MINOR_INSTALL are the
# part of the matrix make test-ci (.ci/run) runs: 1.34's e2e subset and its
# whole install suite (1.34, not the lowest, 1.33: the install suite
# upgrades from the previous chart, which requires 1.34).
# The install suite is where the minors differ most for an install: before
# 1.37 kube-apiserver keeps a webhook connection on the Pod it dialled, so a
# draining replica is still called until the drain closes each connection
# (1.37 resolves the Service per request); the kubelet of that minor runs
# the sandbox runner as a sidecar; helm checks kubeVersion against a real
# 1.34 server. Its upgrade under load on 1.34 caught two defects
# (docs/testing.md). It costs about 4 minutes: the 1.34 control plane is
# built for the e2e subset already. A cold CI machine builds each minor's
# control plane in about 11 minutes on two cores, and the whole matrix
# (three minors, builds and both suites) would take .ci/run past its 90
# minutes; make test-minors runs all of it (docs/testing.md).
CI_MINOR_INSTALL := .*

.PHONY: test-minors
test-minors: $(TEST_TOOLS) $(TEST_SUMMARY) tools-minors build $(if $(IMAGE_READY),,local-image) ## The minor matrix: MINOR_E2E and the install suite on Kubernetes 1.33, 1.34, 1.35 and 1.36 (bin/kube-<minor>/); KUBE_MINORS=1.34 for one.
	@# A renamed test would drop out of the matrix silently: each name must
	@# still match a test.
	@for name in $(MINOR_E2E); do grep -qE "^func $$name\(t \*testing.T\)" test/e2e/*_test.go || { echo "make: MINOR_E2E names $$name, which no test in test/e2e matches"; exit 1; }; done
	@failed=; for m in $(KUBE_MINORS); do \
		echo "make: the e2e subset$(if $(MINOR_INSTALL), and the install suite) on Kubernetes $$m"; \
		GATEHOUSE_KUBE_MINOR=$$m $(TEST_SUMMARY) -quiet $(GO_STATIC) test $(GO_TEST_FLAGS) -json -count=1 -shuffle=on -timeout 20m -run '^($(subst $(space),|,$(strip $(MINOR_E2E))))$$' ./test/e2e/ || failed="$$failed $$m(e2e)"; \
		if [ -n '$(MINOR_INSTALL)' ]; then GATEHOUSE_KUBE_MINOR=$$m $(if $(INSTALL_RELEASE_DIST),GATEHOUSE_RELEASE_DIST=$(INSTALL_RELEASE_DIST)) $(TEST_SUMMARY) $(GO_STATIC) test $(GO_TEST_FLAGS) -json -count=1 -timeout 20m -run '^($(MINOR_INSTALL))$$' ./test/install/ || failed="$$failed $$m(install)"; fi; \
	done; \
	if [ -n "$$failed" ]; then echo "make: the minor matrix failed on$$failed"; exit 1; fi

.PHONY: test-loaded
# RUNS is how many make test runs in a row test-loaded makes (all must pass).
RUNS ?= 1
test-loaded: ## make test on a busy machine: a CPU hog on one core and a make run beside it, RUNS times in a row (RUNS=3).
	RUNS=$(RUNS) MAKE=$(MAKE) hack/test-loaded.sh

.PHONY: chaos
chaos: $(RUN_TOOLS) $(TEST_SUMMARY) build ## Fault tests alone (Gatehouse killed and restarted under load); make test runs them too.
	$(TEST_SUMMARY) $(GO_STATIC) test $(GO_TEST_FLAGS) -json -count=1 -timeout 10m ./test/chaos/

# FUZZTIME is how long each fuzz target runs; FUZZMINIMIZETIME bounds the
# minimization of each new input (Go's default, 60s, would spend a short run
# minimizing one input); FUZZFLAGS are passed on, e.g. FUZZFLAGS='-parallel 1'.
FUZZTIME         ?= 30s
FUZZMINIMIZETIME ?= 5s
FUZZFLAGS        ?=

.PHONY: fuzz
fuzz: ## Run every native Go fuzz target for FUZZTIME each (default 30s), one after another: make fuzz FUZZTIME=10s. Crashers land in the package's testdata/fuzz/.
	GO=$(GO) FUZZTIME=$(FUZZTIME) FUZZMINIMIZETIME=$(FUZZMINIMIZETIME) FUZZFLAGS='$(FUZZFLAGS)' hack/fuzz.sh

.PHONY: bench
bench: $(RUN_TOOLS) build ## Go benchmarks, then the HTTPS load generator against Gatehouse and the bare-TLS floor.
	$(GO) test -run '^$$' -bench . -benchmem -count 3 -timeout 60m ./internal/... ./api/... ./test/bench/ | tee bin/bench-go.txt
	$(GO) run ./test/bench/loadgen

##@ Run

.PHONY: run
# REAL_NODE=1 adds a real Node (containerd, the kubelet, CNI) running the
# images in bin/gatehouse-image.tar and bin/pause-image.tar: docs/real-node.md.
REAL_NODE ?=

# RUN_STARTED is when this make began, so that make run's ready line says
# how long the whole first wait was, builds included.
RUN_STARTED := $(if $(filter run,$(MAKECMDGOALS)),$(shell date +%s))

run: deps-run $(RUN_TOOLS) build $(if $(filter 1,$(REAL_NODE)),$(BIN)/kubelet local-image) ## Start etcd, kube-apiserver, kube-controller-manager, kube-scheduler and Gatehouse locally; kubeconfig in .gatehouse/kubeconfig. Builds only those (and kubelet and images with REAL_NODE=1). REAL_NODE=1 adds a kubelet-run Node.
	$(call step,devenv,devenv (make run's launcher),15 s)
	$(GO_STATIC) build $(IMAGE_GOFLAGS) -o $(BIN)/devenv ./hack/devenv
	REAL_NODE=$(REAL_NODE) GATEHOUSE_IMAGE_ARCHIVE=$(IMAGE_ARCHIVE) PAUSE_IMAGE_ARCHIVE=$(PAUSE_IMAGE_ARCHIVE) GATEHOUSE_RUN_STARTED=$(RUN_STARTED) exec $(BIN)/devenv

.PHONY: help
help:
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*##/ { printf "  %-18s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)
