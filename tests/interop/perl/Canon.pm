package Canon;

# The canonical, lossless JSON form of a Perl value, shared by the interop scripts.
# tests/interop/canon.py documents the same form on the Python side; the two must agree.
#
#   undef                      null
#   boolean (5.36 bool, or a scalar ref blessed into a boolean class)
#                              true / false
#   integer (IV / UV)          {"int": "<decimal>"}
#   float (NV)                 {"float": "<%.17g, lower case>"}
#   string, UTF-8 flag on      {"str": "<text>"}
#   string, UTF-8 flag off     {"bin": "<hex of the bytes>"}
#   array ref                  {"array": [...]}
#   hash ref                   {"hash": [[key, value], ...]}  keys as {"str"} / {"bin"},
#                              sorted by their bytes (UTF-8 for {"str"})
#   array or hash seen before  {"backref": n}  n = order of first visit, depth-first,
#                              keys in the order above
#   ref to a scalar or a ref   {"ref": ...}; a chain of scalar refs (blessed or not) that
#                              loops back on itself (\$x with $x = \$x) is
#                              {"refs_forever": true}, whatever link of the loop it starts at
#   qr//                       {"regexp": [pattern, flags]}  (as {"str"}/{"bin"}; without
#                              the "u" flag Perl derives from a UTF-8 pattern)
#   other blessed ref          {"obj": ["Class", <the same value unblessed>]} (a regexp
#                              blessed into another class: {"ref": {"regexp": ...}})

use strict;
use warnings;
use B ();
use JSON::PP ();
use Scalar::Util qw(blessed reftype refaddr);
use re qw(regexp_pattern);
no warnings 'experimental::builtin';
use builtin qw(is_bool);

our %BOOLEAN_CLASSES = map { $_ => 1 } qw(
    JSON::PP::Boolean JSON::XS::Boolean Types::Serialiser::Boolean
    Cpanel::JSON::XS::Boolean Mojo::JSON::_Bool boolean Data::MessagePack::Boolean
);

my $JSON = JSON::PP->new->ascii->canonical;

sub json { return $JSON->encode( $_[0] ) }

sub _string {
    my ($s) = @_;
    return utf8::is_utf8($s) ? { str => $s } : { bin => unpack( "H*", $s ) };
}

sub _key_sort_bytes {
    my ($k) = @_;
    my $copy = $k;
    utf8::encode($copy) if utf8::is_utf8($copy);
    return $copy;
}

# canon($value): the canonical form of one value (a fresh traversal state per call).
sub canon {
    my ($value) = @_;
    my $state = { seen => {}, next_id => 0 };
    return _canon( $state, $value );
}

sub _scalar {
    my ($v) = @_;
    return undef unless defined $v;
    return $v ? JSON::PP::true : JSON::PP::false if is_bool($v);
    my $flags = B::svref_2object( \$v )->FLAGS;
    return _string($v) if $flags & B::SVf_POK;
    return { int => "$v" } if $flags & B::SVf_IOK;
    return { float => lc sprintf( "%.17g", $v ) } if $flags & B::SVf_NOK;
    return _string("$v");
}

sub _regexp {
    my ( $pat, $mods ) = regexp_pattern( $_[0] );
    $mods =~ s/u//;
    return { regexp => [ _string($pat), _string($mods) ] };
}

sub _canon {
    my ( $st, $v ) = @_;
    return _scalar($v) unless ref $v;
    my $class = blessed($v);
    my $type  = reftype($v);
    if ( defined $class ) {
        if ( $class eq 'Regexp' && $type eq 'REGEXP' ) {
            return _regexp($v);
        }
        if ( $BOOLEAN_CLASSES{$class} && ( $type eq 'SCALAR' ) ) {
            return $$v ? JSON::PP::true : JSON::PP::false;
        }
        return { obj => [ "$class", _unblessed( $st, $v, $type ) ] };
    }
    return _unblessed( $st, $v, $type );
}

sub _unblessed {
    my ( $st, $v, $type ) = @_;
    my $addr = refaddr($v);
    if ( $type eq 'ARRAY' || $type eq 'HASH' ) {
        return { backref => $st->{seen}{$addr} } if exists $st->{seen}{$addr};
        $st->{seen}{$addr} = $st->{next_id}++;
        if ( $type eq 'ARRAY' ) {
            return { array => [ map { _canon( $st, $_ ) } @$v ] };
        }
        my @keys = sort { _key_sort_bytes($a) cmp _key_sort_bytes($b) } keys %$v;
        return { hash => [ map { [ _string($_), _canon( $st, $v->{$_} ) ] } @keys ] };
    }
    if ( $type eq 'SCALAR' || $type eq 'REF' || $type eq 'VSTRING' || $type eq 'LVALUE' ) {
        my %chain;
        for ( my $r = $v; ref $r && reftype($r) =~ /^(?:REF|SCALAR)$/; $r = $$r ) {
            return { refs_forever => JSON::PP::true } if $chain{ refaddr $r }++;
        }
        return { ref => _canon( $st, $$v ) };
    }
    # a regexp blessed into another class: OBJECT cls REFN REGEXP, so a ref to the regexp
    return { ref => _regexp($v) } if $type eq 'REGEXP';
    die "Canon: cannot represent a reference of type $type\n";
}

1;
