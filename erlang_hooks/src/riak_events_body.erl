%% @doc The JSON body of one group POSTed to a companion (pure):
%% `{"epoch":E,"dc":"D","keys":["k1","k2"]}', compact, keys in sorted order.
%% The same bytes as Python's `json.dumps(body, separators=(",", ":"))' for the
%% ASCII names of the contract.
-module(riak_events_body).

-export([encode/3]).

%% @doc Encode a group's body.
-spec encode(riak_events_keys:epoch(), riak_events_keys:dc(),
             [riak_events_keys:chunk_key()]) -> binary().
encode(Epoch, DC, Keys) ->
    iolist_to_binary(
      [<<"{\"epoch\":">>, integer_to_binary(Epoch),
       <<",\"dc\":">>, string(DC),
       <<",\"keys\":[">>, lists:join($,, [string(K) || K <- Keys]),
       <<"]}">>]).

%% A JSON string. Names are ASCII tokens; escape anyway so that no input can break
%% the document.
string(Bin) -> [$", escape(Bin, []), $"].

escape(<<>>, Acc) -> lists:reverse(Acc);
escape(<<$", Rest/binary>>, Acc) -> escape(Rest, [<<"\\\"">> | Acc]);
escape(<<$\\, Rest/binary>>, Acc) -> escape(Rest, [<<"\\\\">> | Acc]);
escape(<<C, Rest/binary>>, Acc) when C < 16#20; C > 16#7f ->
    escape(Rest, [io_lib:format("\\u~4.16.0b", [C]) | Acc]);
escape(<<C, Rest/binary>>, Acc) -> escape(Rest, [C | Acc]).
