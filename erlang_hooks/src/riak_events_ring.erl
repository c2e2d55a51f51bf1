%% @doc The one module that asks riak_core where keys live.
%%
%% A view is taken once per metadata write: the events bucket's props (n_val and
%% chash_keyfun) and the up nodes of service `riak_kv'. Each chunk key's annotated
%% preflist then comes from `riak_core_util:chash_key/2' (the body of
%% `chash_key/1', here with the props read once per write instead of once per key)
%% and `riak_core_apl:get_apl_ann/3'. None of these calls leaves the node: they read
%% the ring, the bucket metadata and the node watcher's table.
%%
%% A `{static, ...}' ring spec (tests only) replaces riak_core with the same
%% computation over a given ownership: `chash:key_of/1' is
%% `crypto:hash(sha, term_to_binary(BKey))', the first primary is position
%% `(Hash div (2^160 div Q) + 1) rem Q', and fallbacks are chosen as
%% `riak_core_apl' does (up primaries in ring order, then for each down primary the
%% next up node after the first n_val positions).
-module(riak_events_ring).

-export([view/3, preflist/2, first_node/2, bucket/2]).

-export_type([view/0, preflist_ann/0]).

-type bucket() :: binary() | {binary(), binary()}.
-type preflist_ann() :: [{{non_neg_integer(), node()}, primary | fallback}].
%% As `riak_core_apl:get_apl_ann/3': `{{RingIndex, Node}, primary | fallback}', the
%% ring index being `Position * (2^160 div Q)'.
-opaque view() :: #{mode := riak_core | static,
                    bucket := bucket(),
                    n_val := pos_integer(),
                    up := [node()],
                    props => [{atom(), term()}],
                    owners => tuple()}.

-define(HASH_SPACE, (1 bsl 160)).

%% @doc The Riak bucket name of a bucket type and bucket: plain for type `default',
%% `{Type, Bucket}' otherwise (as `riak_object:bucket/1' returns it).
-spec bucket(binary(), binary()) -> bucket().
bucket(<<"default">>, Bucket) -> Bucket;
bucket(Type, Bucket) -> {Type, Bucket}.

%% @doc Take a view of the ring for the events bucket.
-spec view(riak_events_config:ring_spec(), binary(), binary()) ->
          {ok, view()} | {error, term()}.
view(riak_core, Type, Name) ->
    Bucket = bucket(Type, Name),
    case riak_core_bucket:get_bucket(Bucket) of
        Props when is_list(Props) ->
            case lists:keyfind(n_val, 1, Props) of
                {n_val, NVal} when is_integer(NVal), NVal > 0 ->
                    {ok, #{mode => riak_core, bucket => Bucket, n_val => NVal,
                           props => Props,
                           up => riak_core_node_watcher:nodes(riak_kv)}};
                _ ->
                    {error, {no_n_val, Bucket}}
            end;
        Error ->
            {error, {bucket_props, Bucket, Error}}
    end;
view({static, #{owners := Owners} = Spec}, Type, Name) ->
    Down = maps:get(down, Spec, []),
    {ok, #{mode => static, bucket => bucket(Type, Name),
           n_val => maps:get(n_val, Spec, 3),
           owners => list_to_tuple(Owners),
           up => lists:usort(Owners) -- Down}}.

%% @doc The annotated preflist of a key of the view's bucket.
-spec preflist(view(), binary()) -> preflist_ann().
preflist(#{mode := riak_core, bucket := Bucket, n_val := NVal, props := Props,
           up := Up}, Key) ->
    DocIdx = riak_core_util:chash_key({Bucket, Key}, Props),
    riak_core_apl:get_apl_ann(DocIdx, NVal, Up);
preflist(#{mode := static, bucket := Bucket, n_val := NVal, owners := Owners,
           up := Up}, Key) ->
    <<Hash:160/integer>> = crypto:hash(sha, term_to_binary({Bucket, Key})),
    Q = tuple_size(Owners),
    Inc = ?HASH_SPACE div Q,
    First = (Hash div Inc + 1) rem Q,
    Walk = [{P * Inc, element(P + 1, Owners)} || I <- lists:seq(0, Q - 1),
                                                  P <- [(First + I) rem Q]],
    {Primaries, Others} = lists:split(min(NVal, Q), Walk),
    UpPrimaries = [{IN, primary} || {_, N} = IN <- Primaries, lists:member(N, Up)],
    Pangs = [IN || {_, N} = IN <- Primaries, not lists:member(N, Up)],
    UpPrimaries ++ fallbacks(Pangs, Others, Up, []).

%% @doc The node that gets a key's group: the first entry of its preflist (the first
%% up primary, else a fallback), or `none' when every candidate is down.
-spec first_node(view(), binary()) -> {ok, node()} | none.
first_node(View, Key) ->
    case preflist(View, Key) of
        [{{_, Node}, _} | _] -> {ok, Node};
        [] -> none
    end.

%% -- internal ----------------------------------------------------------------------

fallbacks([], _, _, Acc) -> lists:reverse(Acc);
fallbacks(_, [], _, Acc) -> lists:reverse(Acc);
fallbacks([{Index, _} | Pangs] = All, [{_, Node} | Others], Up, Acc) ->
    case lists:member(Node, Up) of
        true -> fallbacks(Pangs, Others, Up, [{{Index, Node}, fallback} | Acc]);
        false -> fallbacks(All, Others, Up, Acc)
    end.
