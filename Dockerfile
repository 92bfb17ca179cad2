# A static, non-root image of multiproject-controller-manager. No image can be built on the development machines
# (no Docker engine); this is what a release pipeline runs:
#
#   docker build --build-arg VERSION=v0.1.0 --build-arg GIT_COMMIT=$(git rev-parse HEAD) -t IMAGE:v0.1.0 .
#
# The version is stamped by hack/version.sh, as `make build` does: from these build arguments, or, when they are
# empty and .git is in the build context, from git (v<chart appVersion>-dev+<commit> between releases).
# test/packaging's TestDockerfileBuildStampsTheVersion runs this file's go build line with the same arguments.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
COPY staging/ staging/
RUN go mod download
COPY . .
ARG VERSION=""
ARG GIT_COMMIT=""
RUN CGO_ENABLED=0 VERSION="${VERSION}" GIT_COMMIT="${GIT_COMMIT}" go build -trimpath -ldflags="-s -w $(hack/version.sh)" -o /out/multiproject-controller-manager ./cmd/multiproject-controller-manager

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/multiproject-controller-manager /usr/local/bin/multiproject-controller-manager
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/multiproject-controller-manager"]
