package quota

import "fmt"

// Charge is one bucket a request takes from: a category of the request's
// service, and how many tokens.
type Charge struct {
	Category *Category
	Tokens   int64
}

// RequestError is a request body a service's charging rules refuse, as
// the service itself would: HTTP 400 with an AWS error code such as
// "InvalidParameterException".
type RequestError struct {
	Code    string // the AWS error code
	Message string // what is wrong, naming the field
}

// Error returns the code and the message.
func (e *RequestError) Error() string { return e.Code + ": " + e.Message }

// charger appends the charges of one action beyond its category's token,
// reading what it needs from the request body (AWS JSON).
type charger func(s *Service, body []byte, dst []Charge) ([]Charge, error)

// Charges appends to dst every bucket a request of action takes from: its
// category, one token, first; then, for an action whose cost depends on
// its body, the others. Only ECS RunTask has such rules: on Fargate it
// also takes a token from fargate-run-task and one per task launched from
// fargate-on-demand-tasks or fargate-spot-tasks (see the ecs preset). A
// body those rules refuse gives a *RequestError.
func (s *Service) Charges(action string, body []byte, dst []Charge) ([]Charge, error) {
	cat, ok := s.CategoryOf(action)
	if !ok {
		return dst, fmt.Errorf("%w: %q is not an action of %s", ErrUnknownAction, action, s.Name)
	}
	dst = append(dst, Charge{Category: cat, Tokens: 1})
	if c := s.chargers[action]; c != nil {
		return c(s, body, dst)
	}
	return dst, nil
}

// Weighted reports whether the cost of action depends on its request
// body, so that [Service.Charges] needs the body to decide it.
func (s *Service) Weighted(action string) bool { return s.chargers[action] != nil }
