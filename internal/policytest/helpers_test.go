package policytest

import (
	"github.com/go-logr/logr"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
)

type jsonPatchOp = jsonpatch.JsonPatchOperation

func admissionAllowed() admissionv1.AdmissionResponse {
	return admissionv1.AdmissionResponse{Allowed: true}
}

func discardLog() logr.Logger { return logr.Discard() }

func authUser(name string, groups []string) authenticationv1.UserInfo {
	return authenticationv1.UserInfo{Username: name, Groups: groups}
}

func authzAttrs(verb, resource, namespace string) authorizationv1.ResourceAttributes {
	return authorizationv1.ResourceAttributes{Verb: verb, Resource: resource, Namespace: namespace}
}
