package bfeconf

import (
	"errors"
	"fmt"
	"strings"
)

// argKind is the type of a condition primitive argument.
type argKind int

const (
	argString argKind = iota
	argBool
)

func (k argKind) String() string {
	if k == argBool {
		return "BOOL"
	}
	return "STRING"
}

// primitives are BFE 1.8.5's condition primitives with their argument types
// (bfe_basic/condition/parser/semant.go funcProtos).
var primitives = map[string][]argKind{
	"default_t":                  nil,
	"req_cip_trusted":            nil,
	"req_vip_in":                 {argString},
	"req_proto_match":            {argString},
	"req_proto_secure":           nil,
	"req_host_in":                {argString},
	"req_host_regmatch":          {argString},
	"req_host_tag_in":            {argString},
	"req_host_suffix_in":         {argString},
	"req_path_in":                {argString, argBool},
	"req_path_prefix_in":         {argString, argBool},
	"req_path_suffix_in":         {argString, argBool},
	"req_path_contain":           {argString, argBool},
	"req_path_regmatch":          {argString},
	"req_path_element_prefix_in": {argString, argBool},
	"req_query_key_prefix_in":    {argString},
	"req_query_key_in":           {argString},
	"req_query_exist":            nil,
	"req_query_value_in":         {argString, argString, argBool},
	"req_query_value_prefix_in":  {argString, argString, argBool},
	"req_query_value_suffix_in":  {argString, argString, argBool},
	"req_query_value_regmatch":   {argString, argString},
	"req_query_value_contain":    {argString, argString, argBool},
	"req_query_value_hash_in":    {argString, argString, argBool},
	"req_url_regmatch":           {argString},
	"req_cookie_key_in":          {argString},
	"req_cookie_value_in":        {argString, argString, argBool},
	"req_cookie_value_prefix_in": {argString, argString, argBool},
	"req_cookie_value_suffix_in": {argString, argString, argBool},
	"req_cookie_value_contain":   {argString, argString, argBool},
	"req_cookie_value_hash_in":   {argString, argString, argBool},
	"req_port_in":                {argString},
	"req_tag_match":              {argString, argString},
	"req_ua_regmatch":            {argString},
	"req_header_key_in":          {argString},
	"req_header_value_in":        {argString, argString, argBool},
	"req_header_value_prefix_in": {argString, argString, argBool},
	"req_header_value_suffix_in": {argString, argString, argBool},
	"req_header_value_regmatch":  {argString, argString},
	"req_header_value_contain":   {argString, argString, argBool},
	"req_header_value_hash_in":   {argString, argString, argBool},
	"req_method_in":              {argString},
	"req_cip_range":              {argString, argString},
	"req_vip_range":              {argString, argString},
	"req_cip_hash_in":            {argString},
	"res_code_in":                {argString},
	"res_header_key_in":          {argString},
	"res_header_value_in":        {argString, argString, argBool},
	"ses_vip_range":              {argString, argString},
	"ses_sip_range":              {argString, argString},
	"ses_tls_sni_in":             {argString},
	"ses_tls_client_auth":        nil,
	"ses_tls_client_ca_in":       {argString},
	"req_context_value_in":       {argString, argString, argBool},
	"bfe_time_range":             {argString, argString},
	"bfe_periodic_time_range":    {argString, argString, argString},
	"req_body_json_in":           {argString, argString, argBool},
	"req_body_json_prefix_in":    {argString, argString, argBool},
}

// notForRoutes are primitives BFE accepts in route conditions that this driver refuses as policy:
// hash, tag, context, body, time, session and response primitives depend on state a route rule
// should not (response primitives never match while routing).
var notForRoutes = map[string]bool{
	"req_query_value_hash_in": true, "req_cookie_value_hash_in": true, "req_header_value_hash_in": true,
	"req_cip_hash_in": true, "req_tag_match": true, "req_context_value_in": true,
	"req_body_json_in": true, "req_body_json_prefix_in": true, "bfe_time_range": true, "bfe_periodic_time_range": true,
	"res_code_in": true, "res_header_key_in": true, "res_header_value_in": true,
	"ses_vip_range": true, "ses_sip_range": true, "ses_tls_sni_in": true, "ses_tls_client_auth": true, "ses_tls_client_ca_in": true,
}

// regexpArg is the index of the argument BFE compiles as a regular expression when it builds a
// condition; an invalid one is refused at load.
var regexpArg = map[string]int{
	"req_host_regmatch": 0, "req_path_regmatch": 0, "req_url_regmatch": 0, "req_ua_regmatch": 0,
	"req_query_value_regmatch": 1, "req_header_value_regmatch": 1,
}

// CheckCond parses a route condition expression and checks every primitive's name and argument
// types and the arguments BFE compiles (regular expressions, hosts without a port), as BFE does when
// it loads route_rule.data. Primitives BFE accepts but route rules should not use are refused with a
// PolicyError. Grammar:
//
//	expr    = and { "||" and }
//	and     = unary { "&&" unary }
//	unary   = "!" unary | "(" expr ")" | call
//	call    = ident "(" [ arg { "," arg } ] ")"
//	arg     = string-literal | "true" | "false"
//
// BFE also allows bare identifiers that refer to named conditions; this driver never defines any, so
// they are rejected.
func CheckCond(cond string) error {
	_, err := ParseCond(cond)
	return err
}

// ParseCond parses and checks a condition expression like CheckCond and returns it ready to be
// evaluated against requests (Cond.Match). A policy refusal still returns the parsed condition.
func ParseCond(cond string) (*Cond, error) {
	p := &condParser{src: cond}
	p.next()
	if p.tok.kind == tokEOF {
		return nil, fmt.Errorf("[1:1 empty condition]")
	}
	root, err := p.expr()
	if err != nil {
		return nil, err
	}
	if p.tok.kind != tokEOF {
		return nil, p.errorf("syntax error")
	}
	c := &Cond{src: cond, root: root}
	if len(p.policy) > 0 {
		return c, &PolicyError{Err: errors.Join(p.policy...)}
	}
	return c, nil
}

type tokKind int

const (
	tokEOF tokKind = iota
	tokIdent
	tokString
	tokAnd
	tokOr
	tokNot
	tokLParen
	tokRParen
	tokComma
	tokIllegal
)

type token struct {
	kind tokKind
	text string // identifier or unquoted string
	pos  int    // byte offset of the token
}

type condParser struct {
	src    string
	off    int
	tok    token
	err    error   // scanner error, reported at the next parse step
	policy []error // primitives BFE accepts but this driver refuses
}

func (p *condParser) errorf(format string, args ...any) error {
	if p.err != nil {
		return p.err
	}
	return fmt.Errorf("[1:%d %s]", p.tok.pos+1, fmt.Sprintf(format, args...))
}

func (p *condParser) next() {
	for p.off < len(p.src) && strings.IndexByte(" \t\r\n", p.src[p.off]) >= 0 {
		p.off++
	}
	start := p.off
	if p.off >= len(p.src) {
		p.tok = token{kind: tokEOF, pos: start}
		return
	}
	c := p.src[p.off]
	two := ""
	if p.off+1 < len(p.src) {
		two = p.src[p.off : p.off+2]
	}
	switch {
	case two == "&&":
		p.off += 2
		p.tok = token{kind: tokAnd, pos: start}
	case two == "||":
		p.off += 2
		p.tok = token{kind: tokOr, pos: start}
	case c == '!':
		p.off++
		p.tok = token{kind: tokNot, pos: start}
	case c == '(':
		p.off++
		p.tok = token{kind: tokLParen, pos: start}
	case c == ')':
		p.off++
		p.tok = token{kind: tokRParen, pos: start}
	case c == ',':
		p.off++
		p.tok = token{kind: tokComma, pos: start}
	case c == '"':
		end := p.off + 1
		for end < len(p.src) && p.src[end] != '"' {
			if p.src[end] == '\\' {
				end++
			}
			end++
		}
		if end >= len(p.src) {
			p.err = fmt.Errorf("[1:%d string literal not terminated]", start+1)
			p.tok = token{kind: tokIllegal, pos: start}
			return
		}
		// BFE keeps a literal's bytes as they are: a backslash only stops the next character from
		// ending the literal ("a\\.b" is a, two backslashes, .b; "a\.b" is a, backslash, .b).
		p.off = end + 1
		p.tok = token{kind: tokString, text: p.src[start+1 : end], pos: start}
	case isIdentStart(c):
		end := p.off
		for end < len(p.src) && (isIdentStart(p.src[end]) || (p.src[end] >= '0' && p.src[end] <= '9')) {
			end++
		}
		p.tok = token{kind: tokIdent, text: p.src[start:end], pos: start}
		p.off = end
	default:
		p.off++
		p.tok = token{kind: tokIllegal, text: string(c), pos: start}
	}
}

func isIdentStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func (p *condParser) expr() (node, error) {
	left, err := p.and()
	if err != nil {
		return nil, err
	}
	for p.tok.kind == tokOr {
		p.next()
		right, err := p.and()
		if err != nil {
			return nil, err
		}
		left = orNode{left, right}
	}
	return left, nil
}

func (p *condParser) and() (node, error) {
	left, err := p.unary()
	if err != nil {
		return nil, err
	}
	for p.tok.kind == tokAnd {
		p.next()
		right, err := p.unary()
		if err != nil {
			return nil, err
		}
		left = andNode{left, right}
	}
	return left, nil
}

func (p *condParser) unary() (node, error) {
	switch p.tok.kind {
	case tokNot:
		p.next()
		n, err := p.unary()
		if err != nil {
			return nil, err
		}
		return notNode{n}, nil
	case tokLParen:
		p.next()
		n, err := p.expr()
		if err != nil {
			return nil, err
		}
		if p.tok.kind != tokRParen {
			return nil, p.errorf("syntax error: missing )")
		}
		p.next()
		return n, nil
	case tokIdent:
		return p.call()
	}
	return nil, p.errorf("syntax error")
}

func (p *condParser) call() (node, error) {
	name, pos := p.tok.text, p.tok.pos
	p.next()
	if p.tok.kind != tokLParen {
		return nil, fmt.Errorf("[1:%d condition variable %s not defined]", pos+1, name)
	}
	p.next()
	var kinds []argKind
	var args []string
	for p.tok.kind != tokRParen {
		if len(kinds) > 0 {
			if p.tok.kind != tokComma {
				return nil, p.errorf("syntax error: expected , or )")
			}
			p.next()
		}
		switch {
		case p.tok.kind == tokString:
			kinds = append(kinds, argString)
		case p.tok.kind == tokIdent && (p.tok.text == "true" || p.tok.text == "false"):
			kinds = append(kinds, argBool)
		default:
			return nil, p.errorf("syntax error: expected string or bool argument")
		}
		args = append(args, p.tok.text)
		p.next()
	}
	p.next()
	want, ok := primitives[name]
	if !ok {
		return nil, fmt.Errorf("[1:%d primitive %s not found]", pos+1, name)
	}
	if len(want) != len(kinds) {
		return nil, fmt.Errorf("[1:%d primitive args len error, expect %d, got %d]", pos+1, len(want), len(kinds))
	}
	for i := range want {
		if want[i] != kinds[i] {
			return nil, fmt.Errorf("[1:%d primitive %s arg %d expect %s, got %s]", pos+1, name, i, want[i], kinds[i])
		}
	}
	return buildPrimitive(name, args, &p.policy)
}

// Quote renders s as a condition string literal. BFE takes the bytes between the quotes as they
// are (no unescaping), so s must not contain quotes, backslashes or control characters; the
// validator refuses a literal that would need them.
func Quote(s string) string { return `"` + s + `"` }
