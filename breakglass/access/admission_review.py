"""The AdmissionReview a readiness call sends, and the answer the apiserver would accept
(k8s.io/apiserver/pkg/admission/plugin/webhook/request/admissionreview.go: CreateAdmissionObjects,
VerifyAdmissionResponse).

The version is the first of the webhook's ``admissionReviewVersions`` the apiserver knows (v1, v1beta1), in the
webhook's own order, as the apiserver picks it. The request is harmless: a dry-run CREATE of a ConfigMap
``breakglass-readiness-probe`` in ``default``, a fresh uid, no user but the probe's name. The answer must decode as
an AdmissionReview with a ``response``; for v1 its apiVersion and kind must be v1's and ``response.uid`` the uid
sent (v1beta1 answers were never checked for either); a validating webhook may not return a patch, a mutating one
must pair a patch with its type. ``allowed`` false, or absent (Go reads it as false), is a denial: the backend
answered.
"""

from __future__ import annotations

import json
import uuid

from breakglass.core.safetext import printable

KNOWN = ("v1", "v1beta1")
PROBE_NAME = "breakglass-readiness-probe"
PROBE_NAMESPACE = "default"


def version_for(review_versions) -> str | None:
    return next((v for v in review_versions or () if v in KNOWN), None)


def request(version: str, uid: str | None = None) -> tuple[str, bytes]:
    """(uid, JSON body) of the probe's AdmissionReview."""
    uid = uid or str(uuid.uuid4())
    gvk = {"group": "", "version": "v1", "kind": "ConfigMap"}
    gvr = {"group": "", "version": "v1", "resource": "configmaps"}
    obj = {"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": PROBE_NAME, "namespace": PROBE_NAMESPACE}, "data": {}}
    review = {"apiVersion": f"admission.k8s.io/{version}", "kind": "AdmissionReview",
              "request": {"uid": uid, "kind": gvk, "resource": gvr, "requestKind": gvk, "requestResource": gvr,
                          "name": PROBE_NAME, "namespace": PROBE_NAMESPACE, "operation": "CREATE",
                          "userInfo": {"username": PROBE_NAME}, "object": obj, "oldObject": None, "dryRun": True,
                          "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions",
                                      "dryRun": ["All"]}}}
    return uid, json.dumps(review).encode()


def verify(body: bytes, version: str, uid: str, mutating: bool) -> tuple[bool | None, str]:
    """(allowed, "") for an answer the apiserver accepts, else (None, why it would not)."""
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None, "answer is not JSON"
    if not isinstance(doc, dict):
        return None, "answer is not an AdmissionReview (not a JSON object)"
    resp = doc.get("response")
    if not isinstance(resp, dict):
        return None, "answer is not an AdmissionReview for this request (no response)"
    if version == "v1":
        if resp.get("uid") != uid:
            got = printable(str(resp.get("uid", ""))[:80])
            return None, ("answer is not an AdmissionReview for this request "
                          f'(expected response.uid="{uid}", got "{got}")')
        if doc.get("apiVersion") != "admission.k8s.io/v1" or doc.get("kind") != "AdmissionReview":
            got = printable(f"{str(doc.get('apiVersion') or '')[:60]} {str(doc.get('kind') or '')[:60]}".strip())
            return None, (f"answer is not an AdmissionReview for this request (expected admission.k8s.io/v1 "
                          f"AdmissionReview, got {got or 'neither apiVersion nor kind'})")
    allowed = resp.get("allowed", False)
    if not isinstance(allowed, bool):
        return None, "answer is not an AdmissionReview (response.allowed is not true or false)"
    patch, patch_type = resp.get("patch"), resp.get("patchType")
    if version == "v1" and not mutating and (patch or patch_type is not None):
        return None, "answer is not valid: a validating webhook may not return a patch"
    if version == "v1" and mutating and (bool(patch) != (patch_type is not None) or patch_type == ""):
        return None, "answer is not valid: response.patch and response.patchType must come together"
    return allowed, ""
