# syntax=docker/dockerfile:1
# The Gatehouse image for users with a container engine and a registry:
#   docker build -t ghcr.io/gatehouse-dev/gatehouse:0.1.0 .
#   docker buildx build --platform linux/amd64,linux/arm64 -t ... .
# It holds the same files as `make image` (bin/gatehouse-image.oci.tar):
# the build stage runs the same builder (hack/image) with the same layout
# (hack/image/gatehouse.args) and the same pinned Debian packages
# (hack/image/debian/<arch>.lock, verified by sha256) in --rootfs mode.
# Its digest differs from make image's (Docker's own timestamps and layer
# encoding); releases push make image's index (.github/workflows/release.yml),
# not this. Not built on the development machines (no Docker engine
# there): see the README's "Image" section.

# The only base image: Go's, on the builder's own platform (the binary is
# cross-compiled, and hack/image downloads the target's packages itself,
# so nothing runs under emulation). Pinned by digest: the tag's image
# index as public Dockerfiles pin it (no registry is reachable from the
# development machines); make pin-dockerfile, where one is, rewrites this
# line to the digest the tag has then.
ARG GOLANG_IMAGE=golang:1.26.8-bookworm@sha256:a688600ca24f8a4d3ca77f95b0dd40704a9fc787c826660eb7ba0b641b8b175d

FROM --platform=$BUILDPLATFORM ${GOLANG_IMAGE} AS build
ARG TARGETOS=linux
ARG TARGETARCH
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# As make image: static, -trimpath, the chart's appVersion as the version.
RUN version="v$(sed -n 's/^appVersion: *//p' charts/gatehouse/Chart.yaml)" && \
    CGO_ENABLED=0 GOOS="${TARGETOS}" GOARCH="${TARGETARCH}" go build -trimpath -buildvcs=auto \
      -ldflags "-s -w -X github.com/gatehouse-dev/gatehouse/internal/version.Version=${version}" \
      -o /out/gatehouse ./cmd/gatehouse && \
    CGO_ENABLED=0 go build -trimpath -o /out/image ./hack/image && \
    /out/image @hack/image/gatehouse.args --file=/usr/local/bin/gatehouse=/out/gatehouse \
      --deb-cache=/tmp/debs --platform="${TARGETOS}/${TARGETARCH}" --rootfs=/rootfs

FROM scratch
COPY --from=build /rootfs/ /
# The image config of hack/image/gatehouse.args (--user, --env,
# --entrypoint, --label): keep the two alike.
USER 65532:65532
ENV PATH=/usr/local/bin:/usr/sbin:/usr/bin
ENTRYPOINT ["/usr/local/bin/gatehouse"]
LABEL org.opencontainers.image.source=https://github.com/gatehouse-dev/gatehouse \
      org.opencontainers.image.licenses=Apache-2.0 \
      org.opencontainers.image.title=gatehouse
