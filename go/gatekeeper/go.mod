// Marks the module root only: every build passes -modfile=v<X.Y.Z>.mod (go help modfile). Gatekeeper's manager is
// its module root, github.com/open-policy-agent/gatekeeper/v3 (a main package), named by the .mod's `tool`
// directive; scripts/gobuild.sh builds it from the module cache. Its CRDs and shipped webhook configurations are
// read from deploy/gatekeeper.yaml in the same module zip (breakglass/sandbox/engines.py).
module breakglass.invalid/gatekeeper

go 1.24
