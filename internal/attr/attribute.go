package attr

import (
	"errors"
	"fmt"
)

// Attribute is a field declared once: its wire name and its codec. Declare it
// at package level and share it between every stage that touches the field.
// Attributes are required unless made Optional: a required attribute refuses
// a null or a removal at the write site, so a missing value cannot land
// silently.
//
// Reads do not depend on Optional; the method says what the caller expects:
// Get tolerates absence, MustGet demands the value.
type Attribute[T any] struct {
	name     string
	codec    Codec[T]
	optional bool
}

// New declares a required attribute.
func New[T any](name string, codec Codec[T]) Attribute[T] {
	return Attribute[T]{name: name, codec: codec}
}

// Optional returns the same attribute with null and removal allowed.
func (a Attribute[T]) Optional() Attribute[T] {
	a.optional = true
	return a
}

// Name is the wire key.
func (a Attribute[T]) Name() string { return a.name }

// Codec is the attribute's codec, for composing (LIST(a.Codec())) and for
// tools that look for encrypted fields.
func (a Attribute[T]) Codec() Codec[T] { return a.codec }

// IsOptional reports whether null and removal are allowed on write.
func (a Attribute[T]) IsOptional() bool { return a.optional }

// String prints the declaration, e.g. Attribute("tags", LIST(STR), optional).
func (a Attribute[T]) String() string {
	if a.optional {
		return fmt.Sprintf("Attribute(%q, %s, optional)", a.name, a.codec)
	}
	return fmt.Sprintf("Attribute(%q, %s)", a.name, a.codec)
}

// Of encodes v for a write. The encoding happens now, so an invalid value
// fails here, naming the attribute, and the Field carries the error to
// With/Build. A value whose wire form is null (a nil any) needs an optional
// attribute.
func (a Attribute[T]) Of(v T) Field {
	w, err := a.codec.Encode(v)
	if _, builtin := a.codec.(funcCodec[T]); err == nil && !builtin {
		// A codec from outside this package might return a Go value with no
		// JSON form; hold it to the same invariant as the built-ins.
		w, err = normalize(w)
	}
	if err != nil {
		return Field{name: a.name, err: &FieldError{Name: a.name, Op: "write", Err: err}}
	}
	if w == nil && !a.optional {
		return Field{name: a.name, err: &FieldError{Name: a.name, Op: "write", Err: ErrRequired}}
	}
	return Field{name: a.name, wire: w}
}

// Null writes JSON null; only an optional attribute allows it.
func (a Attribute[T]) Null() Field {
	if !a.optional {
		return Field{name: a.name, err: &FieldError{Name: a.name, Op: "write", Err: ErrRequired}}
	}
	return Field{name: a.name}
}

// Delete removes the member; only an optional attribute allows it.
func (a Attribute[T]) Delete() Field {
	if !a.optional {
		return Field{name: a.name, err: &FieldError{Name: a.name, Op: "delete", Err: ErrRequired}}
	}
	return Field{name: a.name, del: true}
}

// Has reports whether the member exists, even as null.
func (a Attribute[T]) Has(r Reader) bool {
	_, ok := r.record().raw[a.name]
	return ok
}

// Get decodes the value. present is false, with a nil error, when the member
// is absent or null (null means missing, as in the Python library). A value
// that does not decode is an error.
func (a Attribute[T]) Get(r Reader) (v T, present bool, err error) {
	w, ok := r.record().raw[a.name]
	if !ok || w == nil {
		return v, false, nil
	}
	// Decoders may hand out nested maps and slices; give them a copy so the
	// record stays immutable.
	v, err = a.codec.Decode(copyNative(w))
	if err != nil {
		return v, true, &FieldError{Name: a.name, Op: "read", Err: err}
	}
	return v, true, nil
}

// MustGet decodes a value that must be there: absent or null is an error
// matching ErrMissing.
func (a Attribute[T]) MustGet(r Reader) (T, error) {
	v, ok, err := a.Get(r)
	if err == nil && !ok {
		err = &FieldError{Name: a.name, Op: "read", Err: ErrMissing}
	}
	return v, err
}

// Field is one encoded write, made by Attribute.Of, Null or Delete and
// applied by With or Build. It is already in wire form, so applying it cannot
// fail except with the error it carries.
type Field struct {
	name string
	wire any
	del  bool
	err  error
}

// Name is the wire key the field writes.
func (f Field) Name() string { return f.name }

// Err is the encoding error the field carries, if any.
func (f Field) Err() error { return f.err }

var (
	// ErrMissing: a MustGet found the member absent or null.
	ErrMissing = errors.New("attribute is missing")
	// ErrRequired: a write tried to null or remove a required attribute.
	ErrRequired = errors.New("attribute is required; null and removal need Optional()")
)

// FieldError ties a codec failure to the attribute and the direction. It
// unwraps to the codec's error, so errors.As finds, e.g., a *secret.Error
// from an encrypted field.
type FieldError struct {
	Name string // wire name
	Op   string // "read", "write" or "delete"
	Err  error
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("attribute %q: %s: %v", e.Name, e.Op, e.Err)
}

func (e *FieldError) Unwrap() error { return e.Err }
