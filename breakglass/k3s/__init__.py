"""k3s and RKE2: where their kube-apiserver flags come from (config.py) and how breakglass changes them."""
