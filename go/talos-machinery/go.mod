// Marks the module root only: every build passes -modfile=v<X.Y.Z>.mod (go help modfile), so one main.go
// serves every Talos version without a copy per version.
module breakglass.invalid/talos-machinery

go 1.24
