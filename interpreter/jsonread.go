package interpreter

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// jsonReader reads JSON in one strict pass and hands out the raw bytes of the values it skips,
// instead of building them. AggregateStatus requests carry every member's compact candidates
// (hundreds of kilobytes) of which the interpreter reads a few numbers: encoding/json would
// validate the body, scan it again to delimit each raw value, copy it, and scan each member
// status twice more. Keys are matched case-sensitively, like sigs.k8s.io/json (Kubernetes'
// decoder); everything else follows RFC 8259 and encoding/json.
type jsonReader struct {
	b   []byte
	i   int
	err error
}

var errJSONEnd = errors.New("unexpected end of JSON input")

// stringSafe marks bytes that need no attention inside a string: not '"', '\\' or a control
// character.
var stringSafe = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func (r *jsonReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("offset %d: %s", r.i, fmt.Sprintf(format, args...))
	}
}

func (r *jsonReader) skipSpace() {
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

// peek returns the first byte of the next value, or 0 at the end or after an error.
func (r *jsonReader) peek() byte {
	r.skipSpace()
	if r.err != nil || r.i >= len(r.b) {
		return 0
	}
	return r.b[r.i]
}

// end checks that only whitespace follows.
func (r *jsonReader) end() error {
	r.skipSpace()
	if r.err == nil && r.i < len(r.b) {
		r.fail("invalid character %q after top-level value", r.b[r.i])
	}
	return r.err
}

// value validates the next value and returns its bytes.
func (r *jsonReader) value() []byte {
	start := r.peekStart()
	if start < 0 {
		return nil
	}
	r.skipValue(0)
	if r.err != nil {
		return nil
	}
	return r.b[start:r.i]
}

func (r *jsonReader) peekStart() int {
	if r.peek() == 0 {
		if r.err == nil {
			r.err = errJSONEnd
		}
		return -1
	}
	return r.i
}

// maxDepth bounds nesting like encoding/json does, so hostile input cannot exhaust the stack.
const maxDepth = 10000

func (r *jsonReader) skipValue(depth int) {
	if depth > maxDepth {
		r.fail("exceeded max depth")
		return
	}
	switch c := r.peek(); c {
	case '{':
		r.i++
		if r.peek() == '}' {
			r.i++
			return
		}
		for r.err == nil {
			if r.peek() != '"' {
				r.fail("expected object key")
				return
			}
			r.skipString()
			if r.peek() != ':' {
				r.fail("expected ':' after object key")
				return
			}
			r.i++
			r.skipValue(depth + 1)
			switch r.peek() {
			case ',':
				r.i++
			case '}':
				r.i++
				return
			default:
				r.fail("expected ',' or '}' in object")
			}
		}
	case '[':
		r.i++
		if r.peek() == ']' {
			r.i++
			return
		}
		for r.err == nil {
			r.skipValue(depth + 1)
			switch r.peek() {
			case ',':
				r.i++
			case ']':
				r.i++
				return
			default:
				r.fail("expected ',' or ']' in array")
			}
		}
	case '"':
		r.skipString()
	case 't':
		r.literal("true")
	case 'f':
		r.literal("false")
	case 'n':
		r.literal("null")
	case 0:
		if r.err == nil {
			r.err = errJSONEnd
		}
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			r.skipNumber()
			return
		}
		r.fail("invalid character %q looking for beginning of value", c)
	}
}

func (r *jsonReader) literal(lit string) {
	if len(r.b)-r.i < len(lit) || string(r.b[r.i:r.i+len(lit)]) != lit {
		r.fail("invalid literal")
		return
	}
	r.i += len(lit)
}

// Word-at-a-time constants: a uint64 holds 8 string bytes.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// wordIsPlain reports whether none of the 8 bytes of w is '"', '\\' or a control character
// (the classic haszero/hasless bit tricks; exact as a yes/no answer).
func wordIsPlain(w uint64) bool {
	q := w ^ (ones * '"')
	bs := w ^ (ones * '\\')
	return ((w-ones*0x20)&^w|(q-ones)&^q|(bs-ones)&^bs)&highs == 0
}

// skipString consumes a string starting at r.i (a '"'), validating escapes. Candidate lists
// are mostly string bytes, so they are checked 8 at a time.
func (r *jsonReader) skipString() (escaped bool) {
	r.i++ // opening quote
	b := r.b
	for {
		i := r.i
		for i+8 <= len(b) && wordIsPlain(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		for i < len(b) && stringSafe[b[i]] {
			i++
		}
		r.i = i
		if i >= len(b) {
			r.err = errJSONEnd
			return escaped
		}
		switch c := b[i]; {
		case c == '"':
			r.i++
			return escaped
		case c == '\\':
			escaped = true
			if i+1 >= len(b) {
				r.err = errJSONEnd
				return escaped
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				r.i += 2
			case 'u':
				if i+6 > len(b) {
					r.err = errJSONEnd
					return escaped
				}
				for _, h := range b[i+2 : i+6] {
					if !isHex(h) {
						r.fail("invalid \\u escape")
						return escaped
					}
				}
				r.i += 6
			default:
				r.fail("invalid escape in string")
				return escaped
			}
		default:
			r.fail("invalid control character in string")
			return escaped
		}
	}
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// skipNumber consumes a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (r *jsonReader) skipNumber() {
	b, i := r.b, r.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	digits := func() bool {
		start := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i > start
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case !digits():
		r.i = i
		r.fail("invalid number")
		return
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			r.i = i
			r.fail("invalid number")
			return
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			r.i = i
			r.fail("invalid number")
			return
		}
	}
	r.i = i
}

// object calls member for each key of the object that comes next, with the reader positioned
// at the key's value; member must consume the value (skipValue when it does not want it). Any
// other value, null included, is skipped and isObject is false.
func (r *jsonReader) object(member func(key string)) (isObject bool) {
	switch r.peek() {
	case '{':
	case 0:
		if r.err == nil {
			r.err = errJSONEnd
		}
		return false
	default:
		r.skipValue(0)
		return false
	}
	r.i++
	if r.peek() == '}' {
		r.i++
		return true
	}
	for r.err == nil {
		if r.peek() != '"' {
			r.fail("expected object key")
			return true
		}
		key := r.str()
		if r.peek() != ':' {
			r.fail("expected ':' after object key")
			return true
		}
		r.i++
		member(key)
		switch r.peek() {
		case ',':
			r.i++
		case '}':
			r.i++
			return true
		default:
			r.fail("expected ',' or '}' in object")
		}
	}
	return true
}

// array calls elem for each element of the array that comes next; elem must consume it. Any
// other value is skipped and isArray is false.
func (r *jsonReader) array(elem func()) (isArray bool) {
	switch r.peek() {
	case '[':
	case 0:
		if r.err == nil {
			r.err = errJSONEnd
		}
		return false
	default:
		r.skipValue(0)
		return false
	}
	r.i++
	if r.peek() == ']' {
		r.i++
		return true
	}
	for r.err == nil {
		elem()
		switch r.peek() {
		case ',':
			r.i++
		case ']':
			r.i++
			return true
		default:
			r.fail("expected ',' or ']' in array")
		}
	}
	return true
}

// str consumes a string and returns it decoded as encoding/json does (escapes resolved, invalid
// UTF-8 replaced).
func (r *jsonReader) str() string {
	start := r.i
	escaped := r.skipString()
	if r.err != nil {
		return ""
	}
	raw := r.b[start:r.i]
	if !escaped && isASCII(raw) {
		return string(raw[1 : len(raw)-1])
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		r.fail("invalid string: %v", err)
	}
	return s
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

// Kinds of the next value, as seen by typed readers.
const (
	kindMismatch = iota
	kindNull
	kindOK
)

// stringValue reads a string; null gives kindNull, another type is skipped (kindMismatch).
func (r *jsonReader) stringValue() (string, int) {
	switch r.peek() {
	case '"':
		return r.str(), kindOK
	case 'n':
		r.literal("null")
		return "", kindNull
	}
	r.skipValue(0)
	return "", kindMismatch
}

// numberText reads a number and returns its bytes (converted at the parse call, which need not
// allocate); null gives kindNull, another type is skipped (kindMismatch).
func (r *jsonReader) numberText() ([]byte, int) {
	c := r.peek()
	if c != '-' && (c < '0' || c > '9') {
		if c == 'n' {
			r.literal("null")
			return nil, kindNull
		}
		r.skipValue(0)
		return nil, kindMismatch
	}
	start := r.i
	r.skipNumber()
	if r.err != nil {
		return nil, kindMismatch
	}
	return r.b[start:r.i], kindOK
}

// intValue reads an integer that fits bits; anything else (null, another type, a fraction, an
// exponent, out of range) is consumed and reported like encoding/json would not store it.
func (r *jsonReader) intValue(bits int) (int64, int) {
	text, kind := r.numberText()
	if kind != kindOK {
		return 0, kind
	}
	n, err := strconv.ParseInt(string(text), 10, bits)
	if err != nil {
		return 0, kindMismatch
	}
	return n, kindOK
}

// integralValue reads a number with an integral value, the way the Lua customization sees
// numbers (as float64): "3", "3.0" and "3e0" are all 3. Anything else is consumed and
// reported as a mismatch (kindNull for null).
func (r *jsonReader) integralValue() (int64, int) {
	text, kind := r.numberText()
	if kind != kindOK {
		return 0, kind
	}
	f, err := strconv.ParseFloat(string(text), 64)
	if err != nil {
		return 0, kindMismatch
	}
	if n, ok := integral(f); ok {
		return n, kindOK
	}
	return 0, kindMismatch
}

// boolValue reads a boolean; null gives kindNull, another type is skipped (kindMismatch).
func (r *jsonReader) boolValue() (bool, int) {
	switch r.peek() {
	case 't':
		r.literal("true")
		return true, kindOK
	case 'f':
		r.literal("false")
		return false, kindOK
	case 'n':
		r.literal("null")
		return false, kindNull
	}
	r.skipValue(0)
	return false, kindMismatch
}

// isNull consumes a null when it comes next.
func (r *jsonReader) isNull() bool {
	if r.peek() == 'n' {
		r.literal("null")
		return r.err == nil
	}
	return false
}
