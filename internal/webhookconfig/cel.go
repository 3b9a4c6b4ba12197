package webhookconfig

import (
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	admissioncel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celenvironment "k8s.io/apiserver/pkg/cel/environment"
)

// matchConditionCompiler is kube-apiserver's compiler of admission CEL,
// built once: its environments take a while to build.
var matchConditionCompiler = sync.OnceValue(func() admissioncel.Compiler {
	return admissioncel.NewCompiler(celenvironment.MustBaseEnvSet(celenvironment.DefaultCompatibilityVersion()))
})

// compileMatchCondition compiles c as kube-apiserver does when a webhook
// configuration is written (new expressions, the authorizer declared), so
// that an operator's condition that the API server would refuse stops
// Gatehouse at start-up, naming the field, rather than fail every write of
// the configuration later.
func compileMatchCondition(c admissionregistrationv1.MatchCondition) error {
	accessor := matchconditions.MatchCondition(c)
	result := matchConditionCompiler().CompileCELExpression(&accessor,
		admissioncel.OptionalVariableDeclarations{HasAuthorizer: true}, celenvironment.NewExpressions)
	if result.Error != nil {
		return result.Error
	}
	return nil
}
