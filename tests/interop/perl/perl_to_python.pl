#!/usr/bin/perl
# Perl -> Python interop corpus.
#
# Encodes every corpus item with Sereal::Encoder under every option set Perl can write
# (protocol 1..5 x compression x dedupe_strings x user header), decodes each document
# again with Sereal::Decoder, and prints one JSON object per line on stdout:
#
#   {"kind":"value","id":N,"canon":<canonical form>}      (each distinct form once)
#   {"kind":"doc","item":..,"protocol":..,"compression":..,"dedupe":0|1,"header":0|1,
#    "hex":"<document>","value":N,"header_value":N|null}
#   {"kind":"unsupported","protocol":..,"compression":..,"error":".."}
#
# "value" is the canonical form (Canon.pm) of what Perl's own decoder made of the
# document, so both decoders are judged on the very same bytes.
use strict;
use warnings;
use FindBin;
use lib $FindBin::Bin;
use Canon;
use JSON::PP ();
use Scalar::Util qw(weaken);
use Sereal::Encoder qw(SRL_UNCOMPRESSED SRL_SNAPPY SRL_ZLIB SRL_ZSTD);
use Sereal::Decoder;

binmode STDOUT;

# ---- deterministic realistic events (no rand(): the same bytes on every Perl) ----
my $lcg = 12345;
sub rnd { my ($n) = @_; $lcg = ( $lcg * 1103515245 + 12345 ) % 2147483648; return $lcg % $n }
sub pick { return $_[ rnd( scalar @_ ) ] }

sub make_event {
    my ($i) = @_;
    my @hosts = map { sprintf "app-%03d.ams4.example.com", $_ } 1 .. 7;
    my @urls  = ( "/search?q=h\x{f4}tel", "/book/confirm", "/", "/api/v2/availability",
                  "/static/app.js" );
    my @uas   = ( "Mozilla/5.0 (X11; Linux x86_64) Gecko/20100101 Firefox/121.0",
                  "Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) Safari/604.1" );
    my %ev = (
        epoch    => 1700000000 + $i,
        type     => pick(qw(web cron lb)),
        host     => pick(@hosts),
        dc       => 4,
        pid      => 1000 + rnd(30000),
        duration => rnd(100000) / 1000,
        status   => pick( 200, 200, 200, 302, 404, 500 ),
        ok       => rnd(2) ? !!1 : !!0,
        user     => rnd(3) ? undef : "u" . rnd(1000),
        http     => { method => pick(qw(GET GET POST)), url => pick(@urls), ua => pick(@uas),
                      bytes => rnd(2**31) },
        tags     => [ map { pick(qw(alpha beta gamma delta)) } 1 .. rnd(5) ],
        city     => pick( "Amsterdam", "K\x{f8}benhavn", "\x{6771}\x{4eac}", "Z\x{fc}rich" ),
    );
    $ev{timings} = { map { ( "t$_" => rnd(1000) ) } 1 .. rnd(4) } if rnd(2);
    return \%ev;
}

# ---- the corpus ----
sub corpus {
    my @items;
    my $add = sub { push @items, [@_] };

    $add->( int_scalar_0      => 0 );
    $add->( int_scalar_uvmax  => 18446744073709551615 );
    $add->( int_scalar_ivmin  => -9223372036854775808 );
    $add->( int_boundaries    => [ 0, 15, 16, -16, -17, 127, 128, 255, 256, 4294967295,
                                   4294967296, 9223372036854775807, -9223372036854775808,
                                   18446744073709551615, -1, 1 ] );
    $add->( floats            => [ 0.5, -1.25, 3.141592653589793, 1e300, -1e-300, 0.1,
                                   9**9**9, -9**9**9, 1.5e-7, 2.5 ] );
    $add->( float_scalar      => 0.1 );
    my $inf = 9**9**9;
    $add->( nan               => [ $inf - $inf, -( $inf - $inf ) ] );
    $add->( undef_scalar      => undef );
    $add->( strings_ascii     => [ "", "a", "x" x 31, "y" x 32, "z" x 5000, "with\0nul" ] );
    my $upgraded_ascii = "abc";    utf8::upgrade($upgraded_ascii);
    my $upgraded_latin = "caf\xe9"; utf8::upgrade($upgraded_latin);
    $add->( strings_utf8      => [ "caf\x{e9} \x{263a} \x{1f600}", "\x{6771}\x{4eac}",
                                   $upgraded_ascii, $upgraded_latin, "\x{263a}" x 40 ] );
    $add->( strings_binary    => [ "caf\xe9", "\x00\xff\xfe\x80", "caf\xc3\xa9",
                                   join( "", map { chr } 0 .. 255 ) ] );
    $add->( str_scalar_utf8   => "\x{263a} scalar" );
    $add->( str_scalar_bin    => "\xff\xfe" );
    $add->( booleans          => [ JSON::PP::true, JSON::PP::false, !!1, !!0, 1 == 1,
                                   1 == 0, undef ] );
    $add->( bool_scalar       => !!1 );
    $add->( nested            => { a => { b => { c => [ 1, [ 2, [ 3, { d => undef } ] ] ] } },
                                   e => [ [], {}, [ {} ] ] } );
    $add->( big_hash          => { map { ( "key_$_" => $_ * 3 ) } 1 .. 40 } );
    $add->( big_array         => [ map { $_ % 7 ? "s$_" : $_ } 1 .. 100 ] );
    $add->( hash_keys         => { "cl\x{e9}" => 1, "caf\xe9" => 2, "\x{263a}" => 3, "" => 4,
                                   "k" x 40 => 5, "caf\xc3\xa9" => 6 } );
    my $shared_a = [ 1, 2 ];
    my $shared_h = { k => "v" };
    $add->( shared_refs       => { x => $shared_a, y => $shared_a, z => [ $shared_a, $shared_h ],
                                   w => $shared_h } );
    my $cyc_h = { name => "c" }; $cyc_h->{self} = $cyc_h;
    $add->( cycle_hash        => $cyc_h );
    my $cyc_a = [1]; push @$cyc_a, $cyc_a;
    $add->( cycle_array       => $cyc_a );
    my $weak = { name => "w" }; $weak->{self} = $weak; weaken( $weak->{self} );
    $add->( weak_cycle        => [ $weak, $weak ] );
    my $s = "shared scalar";
    $add->( scalar_refs       => [ \"str", \42, \undef, \\"x", \[ 1, 2 ], \{ a => 1 } ] );
    $add->( shared_scalar_ref => [ \$s, \$s ] );
    my $self_ref; $self_ref = \$self_ref;
    $add->( self_scalar_ref   => $self_ref );
    $add->( blessed           => [ bless( { a => 1, b => [ 1, 2 ] }, "Foo::Bar" ),
                                   bless( [ 1, 2 ], "Baz" ),
                                   bless( \( my $bs = "v" ), "Scal" ),
                                   bless( {}, "Foo::Bar" ), bless( {}, "Baz" ) ] );
    my $obj = bless { id => 7 }, "Shared::Obj";
    $add->( blessed_shared    => [ $obj, $obj ] );
    # JSON::PP's true and false are two shared objects: the second use of each is a REFP
    $add->( shared_booleans   => [ JSON::PP::true, JSON::PP::true, JSON::PP::false,
                                   JSON::PP::false ] );
    $add->( regexps           => [ qr/ab+c/i, qr/^\d+$/msx, qr/caf\x{e9}\x{263a}/, qr/plain/ ] );
    $add->( repeated_strings  => { hosts => [ ("web-01.ams4.example.com") x 20 ],
                                   map { ( "k$_" => "value-repeated-long-enough" ) } 1 .. 10 } );
    $add->( events            => [ map { make_event($_) } 1 .. 40 ] );
    return @items;
}

# ---- option sets ----
my @compressions = (
    [ none          => { compress => SRL_UNCOMPRESSED }, 1 ],
    [ snappy        => { compress => SRL_SNAPPY },       1 ],
    [ snappy_legacy => { snappy   => 1 },                1 ],    # Sereal v1's framing
    [ zlib          => { compress => SRL_ZLIB },         3 ],
    [ zstd          => { compress => SRL_ZSTD },         3 ],
);

my $header_value = { dc => "ams4", epoch => 1700000000, tags => [ "a", "b", "a" ],
                     "caf\x{e9}" => 1.5 };

my %value_ids;
my $next_value_id = 0;
sub value_id {
    my ($v) = @_;
    my $json = Canon::json( Canon::canon($v) );
    unless ( exists $value_ids{$json} ) {
        $value_ids{$json} = $next_value_id++;
        print qq({"kind":"value","id":$value_ids{$json},"canon":$json}\n);
    }
    return $value_ids{$json};
}

my $decoder = Sereal::Decoder->new;
my @items   = corpus();
for my $protocol ( 1 .. 5 ) {
    for my $c (@compressions) {
        my ( $cname, $copts, $min_protocol ) = @$c;
        next if $protocol < $min_protocol;
        next if $cname eq 'snappy_legacy' && $protocol > 1;    # same as snappy from v2 on
        for my $dedupe ( 0, 1 ) {
            for my $with_header ( $protocol >= 2 ? ( 0, 1 ) : (0) ) {
                my $enc = Sereal::Encoder->new( {
                    protocol_version => $protocol, compress_threshold => 0,
                    dedupe_strings   => $dedupe, %$copts,
                } );
                for my $item (@items) {
                    my ( $name, $value ) = @$item;
                    my $doc = $with_header ? $enc->encode( $value, $header_value )
                                           : $enc->encode($value);
                    my ( $hdr, $decoded ) = @{ $decoder->decode_with_header($doc) };
                    my $rec = {
                        kind => "doc", item => $name, protocol => $protocol,
                        compression => $cname, dedupe => $dedupe, header => $with_header,
                        hex => unpack( "H*", $doc ), value => value_id($decoded),
                        header_value => $with_header ? value_id($hdr) : undef,
                    };
                    print Canon::json($rec), "\n";
                }
            }
        }
    }
}
