# A static, non-root image of multiproject-controller-manager, for those with a container engine. The development
# machines have none: `make release` builds the release's image without one (hack/release.sh, docs/release.md). With
# an engine:
#
#   docker build --build-arg VERSION=v0.1.0 --build-arg GIT_COMMIT=$(git rev-parse HEAD) -t IMAGE:v0.1.0 .
#
# The version is stamped by hack/version.sh, as `make build` does: from these build arguments, or, when they are
# empty, from git (v<chart appVersion>-dev+<commit> between releases), which is why .dockerignore keeps .git and
# the chart in the build context.
# test/packaging's TestDockerfileBuildStampsTheVersion runs this file's go build line with the same arguments, and
# TestDockerfileBaseImagesArePinned checks the base images below.
#
# Base images are named by version: Go by the patch release the project builds and tests with (go.mod's go line
# names the oldest Go it accepts), distroless by its nonroot tag. Pin them by digest too if your pipeline requires
# it (`crane digest gcr.io/distroless/static-debian12:nonroot`).
FROM golang:1.26.8 AS build
WORKDIR /src
COPY go.mod go.sum ./
COPY staging/ staging/
RUN go mod download
COPY . .
ARG VERSION=""
ARG GIT_COMMIT=""
RUN CGO_ENABLED=0 VERSION="${VERSION}" GIT_COMMIT="${GIT_COMMIT}" go build -trimpath -ldflags="-s -w $(hack/version.sh)" -o /out/multiproject-controller-manager ./cmd/multiproject-controller-manager

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=""
ARG GIT_COMMIT=""
# Some of the OCI labels of make release's image; version and revision are empty without the build arguments.
LABEL org.opencontainers.image.title="multiproject-controller-manager" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${GIT_COMMIT}"
COPY --from=build /out/multiproject-controller-manager /usr/local/bin/multiproject-controller-manager
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/multiproject-controller-manager"]
