"""Talos Linux: machine configuration eras and the kube-apiserver extraArgs in them."""
