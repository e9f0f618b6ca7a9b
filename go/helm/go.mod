// Marks the module root only: every build passes -modfile=v<X.Y.Z>.mod (go help modfile). helm's command is
// helm.sh/helm/v3/cmd/helm, a main package (not importable), so each .mod names it with a `tool` directive and
// scripts/gobuild.sh builds that package from the module cache: no helm code lives here.
module breakglass.invalid/helm

go 1.24
