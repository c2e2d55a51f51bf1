#!/usr/bin/perl
# Documents built from the test data of Sereal::Decoder's own distribution (fetched by
# tests/interop/fetch_testdata.sh), each with Perl's decoding in canonical form.
# Run with the distribution's top directory as the working directory.
#
#   basic      Sereal::TestSet's @BasicTests: hand-assembled expected encodings, per
#              protocol version 1..5 (the bytes other implementations test against)
#   roundtrip  Sereal::TestSet's roundtrip structures, encoded by Sereal::Encoder per
#              protocol version (those up to 2 KB)
#   corpus     t/data/corpus (Perl data structures), encoded v4 + zstd + dedupe and v1
#   backcompat the documents in t/195_backcompat.t, written by Sereal 2.01 .. 5.x
#
# Output: JSON lines, as perl_to_python.pl ({"kind":"value"} then {"kind":"doc"} with
# "set", "name", "hex", "value" or "perl_error").
use strict;
use warnings;
use FindBin;
use lib $FindBin::Bin;
use Canon;
use Sereal::Encoder qw(SRL_ZSTD SRL_UNCOMPRESSED);
use Sereal::Decoder;

BEGIN {    # TestSet loads Test::LongString only for its own assertions, unused here
    $INC{'Test/LongString.pm'} = __FILE__;
    package Test::LongString;
    sub import { }
}
use lib 't/lib';
use Sereal::TestSet qw(:all);

binmode STDOUT;
my $decoder = Sereal::Decoder->new;
my %value_ids;
my $next_id = 0;

sub emit {
    my ( $set, $version, $name, $doc ) = @_;
    my %rec = ( kind => "doc", set => $set, version => $version, name => $name,
                hex => unpack( "H*", $doc ) );
    my $decoded = eval { [ $decoder->decode($doc) ] };
    if ( !$decoded ) {
        $rec{perl_error} = "$@";
    }
    else {
        my $json = Canon::json( Canon::canon( $decoded->[0] ) );
        unless ( exists $value_ids{$json} ) {
            $value_ids{$json} = $next_id++;
            print qq({"kind":"value","id":$value_ids{$json},"canon":$json}\n);
        }
        $rec{value} = $value_ids{$json};
    }
    print Canon::json( \%rec ), "\n";
}

for my $version ( 1 .. 5 ) {
    setup_tests($version);
    for my $t (@BasicTests) {
        my $body = ref( $t->[1] ) eq 'CODE' ? $t->[1]->() : $t->[1];
        emit( "basic", $version, $t->[2], Header($version) . $body );
    }
    my $enc = Sereal::Encoder->new( { protocol_version => $version } );
    for my $t ( Sereal::TestSet::_get_roundtrip_tests() ) {
        my $doc = eval { $enc->encode( $t->[1] ) };
        # the long-string variants (10-40 KB each) add bulk, not coverage
        emit( "roundtrip", $version, $t->[0], $doc ) if defined $doc && length $doc <= 2048;
    }
}

{
    open my $fh, "<", "t/data/corpus" or die "t/data/corpus: $!";
    local $/ = "\n---\n";
    my $i = 0;
    my $v4 = Sereal::Encoder->new( { protocol_version => 4, compress => SRL_ZSTD,
                                     dedupe_strings => 1, compress_threshold => 0 } );
    my $v1 = Sereal::Encoder->new( { protocol_version => 1, compress => SRL_UNCOMPRESSED } );
    while ( my $src = <$fh> ) {
        chomp $src;
        my $VAR1;
        my $data = eval $src;
        die "t/data/corpus entry $i: $@" if $@;
        emit( "corpus", 4, "corpus entry $i", $v4->encode($data) );
        emit( "corpus", 1, "corpus entry $i", $v1->encode($data) );
        $i++;
    }
}

{
    open my $fh, "<", "t/195_backcompat.t" or die "t/195_backcompat.t: $!";
    my $text = do { local $/; <$fh> };
    while ( $text =~ /^'([\d.]+)' => <<'EOF',\n(.*?)^EOF\n/msg ) {
        my ( $writer, $uu ) = ( $1, $2 );
        my $doc = unpack "u*", $uu;
        my ($version) = unpack "x4C", $doc;
        emit( "backcompat", $version & 15, "written by Sereal $writer", $doc );
    }
}
