%% @doc A minimal JSON reader for the tests (OTP 25 has no json module): objects as
%% maps with binary keys, arrays as lists, strings as binaries (\uXXXX below 256
%% only), integers, true/false/null as atoms. Enough for tests/vectors/*.json.
-module(riak_events_json_reader).

-export([file/1, decode/1]).

-spec file(file:filename()) -> term().
file(Path) ->
    {ok, Bin} = file:read_file(Path),
    decode(Bin).

-spec decode(binary()) -> term().
decode(Bin) ->
    {Value, Rest} = value(ws(Bin)),
    <<>> = ws(Rest),
    Value.

value(<<${, R/binary>>) -> object(ws(R), #{});
value(<<$[, R/binary>>) -> array(ws(R), []);
value(<<$", R/binary>>) -> string(R, []);
value(<<"true", R/binary>>) -> {true, R};
value(<<"false", R/binary>>) -> {false, R};
value(<<"null", R/binary>>) -> {null, R};
value(R) -> number(R, []).

object(<<$}, R/binary>>, Acc) -> {Acc, R};
object(<<$", R0/binary>>, Acc) ->
    {Key, R1} = string(R0, []),
    <<$:, R2/binary>> = ws(R1),
    {Value, R3} = value(ws(R2)),
    case ws(R3) of
        <<$,, R4/binary>> -> object(ws(R4), Acc#{Key => Value});
        <<$}, R4/binary>> -> {Acc#{Key => Value}, R4}
    end.

array(<<$], R/binary>>, []) -> {[], R};
array(R0, Acc) ->
    {Value, R1} = value(ws(R0)),
    case ws(R1) of
        <<$,, R2/binary>> -> array(ws(R2), [Value | Acc]);
        <<$], R2/binary>> -> {lists:reverse([Value | Acc]), R2}
    end.

string(<<$", R/binary>>, Acc) -> {iolist_to_binary(lists:reverse(Acc)), R};
string(<<$\\, $u, H:4/binary, R/binary>>, Acc) ->
    C = binary_to_integer(H, 16),
    true = C < 256,
    string(R, [C | Acc]);
string(<<$\\, E, R/binary>>, Acc) ->
    C = case E of
            $n -> $\n; $t -> $\t; $r -> $\r; $b -> $\b; $f -> $\f;
            $/ -> $/; $\\ -> $\\; $" -> $"
        end,
    string(R, [C | Acc]);
string(<<C, R/binary>>, Acc) -> string(R, [C | Acc]).

number(<<C, R/binary>>, Acc) when (C >= $0 andalso C =< $9); C =:= $- ->
    number(R, [C | Acc]);
number(R, Acc) when Acc =/= [] -> {list_to_integer(lists:reverse(Acc)), R}.

ws(<<C, R/binary>>) when C =:= $\s; C =:= $\t; C =:= $\n; C =:= $\r -> ws(R);
ws(R) -> R.
