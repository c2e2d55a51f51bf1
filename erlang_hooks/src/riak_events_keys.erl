%% @doc Metadata keys, metadata values and chunk keys (pure; the contract of
%% ../shared/DESIGN.md section 3, as eventstore/names.py parses it).
%%
%% <ul>
%% <li>metadata key `<epoch>-<dc>'; chunk key `<epoch>:<dc>:<type>:<subtype>:<chunk>'</li>
%% <li>metadata value: `<type>:<subtype>:<chunk>' entries joined by `|'; empty = no
%%     entries; readers accept any order and repeats.</li>
%% <li>epoch, chunk: canonical decimal (`0' or no leading zero), at most 2^63-1;
%%     dc `[A-Za-z0-9_]+'; type `[A-Za-z0-9_.]+'; subtype `[A-Za-z0-9_.]*'.</li>
%% </ul>
%% Only canonical text parses, so an entry's text is its canonical form and sorting
%% the texts gives the canonical (byte) order.
-module(riak_events_keys).

-export([parse_metadata_key/1, parse_value/1, merge_values/1, chunk_keys/3]).

-export_type([epoch/0, dc/0, entry/0, chunk_key/0]).

-type epoch() :: non_neg_integer().
-type dc() :: binary().
-type entry() :: binary().      %% `<type>:<subtype>:<chunk>'
-type chunk_key() :: binary().  %% `<epoch>:<dc>:<type>:<subtype>:<chunk>'

-define(MAX_INT, 9223372036854775807).

%% @doc Parse a metadata key `<epoch>-<dc>'.
-spec parse_metadata_key(term()) -> {ok, epoch(), dc()} | {error, term()}.
parse_metadata_key(Key) when is_binary(Key) ->
    case binary:split(Key, <<"-">>) of
        [EpochText, DC] ->
            case {int(EpochText), token(DC, false)} of
                {{ok, Epoch}, true} -> {ok, Epoch, DC};
                {{error, Why}, _} -> {error, {epoch, Why}};
                {_, false} -> {error, {dc, DC}}
            end;
        [_] ->
            {error, no_dash}
    end;
parse_metadata_key(_) ->
    {error, not_a_binary}.

%% @doc Parse one metadata value into its distinct entries in canonical order.
%% Any malformed entry rejects the whole value.
-spec parse_value(term()) -> {ok, [entry()]} | {error, term()}.
parse_value(<<>>) ->
    {ok, []};
parse_value(Value) when is_binary(Value) ->
    Entries = binary:split(Value, <<"|">>, [global]),
    case lists:dropwhile(fun is_entry/1, Entries) of
        [] -> {ok, lists:usort(Entries)};
        [Bad | _] -> {error, {entry, Bad}}
    end;
parse_value(_) ->
    {error, not_a_binary}.

%% @doc Merge sibling values: the sorted union of the entries of every value that
%% parses. Returns the entries and the errors of the values that did not.
-spec merge_values([term()]) -> {[entry()], [term()]}.
merge_values(Values) ->
    {Lists, Errors} =
        lists:foldl(fun(V, {Ok, Bad}) ->
                            case parse_value(V) of
                                {ok, Es} -> {[Es | Ok], Bad};
                                {error, Why} -> {Ok, [Why | Bad]}
                            end
                    end, {[], []}, Values),
    {lists:umerge(Lists), lists:reverse(Errors)}.

%% @doc The chunk keys of entries of one epoch and dc, in the entries' order.
-spec chunk_keys(epoch(), dc(), [entry()]) -> [chunk_key()].
chunk_keys(Epoch, DC, Entries) ->
    Prefix = <<(integer_to_binary(Epoch))/binary, ":", DC/binary, ":">>,
    [<<Prefix/binary, E/binary>> || E <- Entries].

%% -- internal ----------------------------------------------------------------------

is_entry(Entry) ->
    case binary:split(Entry, <<":">>, [global]) of
        [Type, Subtype, Chunk] ->
            token(Type, true) andalso (Subtype =:= <<>> orelse token(Subtype, true))
                andalso element(1, int(Chunk)) =:= ok;
        _ ->
            false
    end.

%% Canonical decimal in 0..2^63-1.
int(<<"0">>) -> {ok, 0};
int(<<D, _/binary>> = Text) when D >= $1, D =< $9 ->
    case digits(Text) of
        false -> {error, not_canonical};
        true when byte_size(Text) > 19 -> {error, too_large};
        true ->
            case binary_to_integer(Text) of
                N when N =< ?MAX_INT -> {ok, N};
                _ -> {error, too_large}
            end
    end;
int(_) -> {error, not_canonical}.

digits(<<>>) -> true;
digits(<<D, Rest/binary>>) when D >= $0, D =< $9 -> digits(Rest);
digits(_) -> false.

%% `[A-Za-z0-9_]+', or `[A-Za-z0-9_.]+' with Dots.
token(<<>>, _) -> false;
token(Text, Dots) -> token_chars(Text, Dots).

token_chars(<<>>, _) -> true;
token_chars(<<C, Rest/binary>>, Dots)
  when (C >= $a andalso C =< $z); (C >= $A andalso C =< $Z);
       (C >= $0 andalso C =< $9); C =:= $_ ->
    token_chars(Rest, Dots);
token_chars(<<$., Rest/binary>>, true) -> token_chars(Rest, true);
token_chars(_, _) -> false.
