%% @doc Test stand-in for Riak's riak_object: only what the hook calls (bucket/1,
%% key/1, get_contents/1), with Riak's shapes (metadata is a dict; a typed bucket is
%% {Type, Bucket}). Built into _build/test only; never install it.
-module(riak_object).

-export([new/3, bucket/1, key/1, get_contents/1, get_value/1]).

-record(stub_object, {bucket, key, contents}).

%% @doc An object with the given siblings, each {Value} or {Value, deleted}.
-spec new(term(), binary(), [binary() | {binary(), deleted}]) -> #stub_object{}.
new(Bucket, Key, Siblings) ->
    Contents = [case S of
                    {V, deleted} -> {dict:store(<<"X-Riak-Deleted">>, "true", dict:new()), V};
                    V -> {dict:store(<<"content-type">>, "text/plain", dict:new()), V}
                end || S <- Siblings],
    #stub_object{bucket = Bucket, key = Key, contents = Contents}.

-spec bucket(#stub_object{}) -> term().
bucket(#stub_object{bucket = B}) -> B.

-spec key(#stub_object{}) -> binary().
key(#stub_object{key = K}) -> K.

-spec get_contents(#stub_object{}) -> [{dict:dict(), term()}].
get_contents(#stub_object{contents = C}) -> C.

%% @doc As Riak's: crashes on siblings (the hook must never call it).
-spec get_value(#stub_object{}) -> term().
get_value(#stub_object{contents = [{_, V}]}) -> V.
