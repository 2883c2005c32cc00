/* The lstm and gru layers (minigrad/rnn.h): outputs and final states equal to PyTorch's nn.LSTM and
 * nn.GRU (batch_first=True) with the same weights, with and without an initial state; a sequence
 * run in two halves with the state carried equals one run; PyTorch's parameter names and shapes;
 * the typed constructors and the string configs build the same layer; errors name the layer and
 * the field. (Finite-difference gradient checks of both layers: the case table of test_layers.c.) */
#include "test_util.h"
#include "minigrad/minigrad.h"
#include "minigrad/nn.h"
#include "minigrad/rnn.h"

#include <math.h>
#include <string.h>

/* Made by tests/rnn_reference.py with /usr/bin/python3 and Debian's python3-torch 1.13 (the script
 * says how every weight and input is formed; fill_formula below forms them the same way):
 * B = 2, T = 4, input_size = 3, hidden_size = 5, num_layers = 2. */
static const float lstm_y[40] = {3.94209549e-02f, -1.53810903e-01f, -1.46815002e-01f, -1.55745581e-01f, -3.32872607e-02f, 1.04317479e-01f, -2.64638394e-01f, -2.18051851e-01f, -2.56398350e-01f, -5.49897589e-02f, 1.71250001e-01f, -3.37794453e-01f, -2.44240105e-01f, -3.15090179e-01f, -7.51245245e-02f, 1.86743721e-01f, -3.67969185e-01f, -2.64566928e-01f, -3.60774755e-01f, -8.96309093e-02f, 3.53391357e-02f, -1.53850257e-01f, -1.44369528e-01f, -1.59339026e-01f, -2.90481672e-02f, 1.04932070e-01f, -2.60018498e-01f, -2.22676113e-01f, -2.52206594e-01f, -5.92035726e-02f, 1.60582095e-01f, -3.30758691e-01f, -2.52025992e-01f, -3.14507663e-01f, -7.74697959e-02f, 1.98256791e-01f, -3.71215433e-01f, -2.61570454e-01f, -3.53750348e-01f, -9.19937566e-02f};
static const float lstm_hn[20] = {-3.35786343e-01f, -1.67793110e-01f, -3.12205344e-01f, -1.62993539e-02f, 9.13518742e-02f, -2.19038263e-01f, -1.18798785e-01f, -4.78455007e-01f, 6.50164066e-03f, 1.23611383e-01f, 1.86743721e-01f, -3.67969185e-01f, -2.64566928e-01f, -3.60774755e-01f, -8.96309093e-02f, 1.98256791e-01f, -3.71215433e-01f, -2.61570454e-01f, -3.53750348e-01f, -9.19937566e-02f};
static const float lstm_cn[20] = {-4.62355018e-01f, -3.27506661e-01f, -4.94774163e-01f, -3.72693166e-02f, 3.03690255e-01f, -3.73304725e-01f, -2.32350051e-01f, -6.56535745e-01f, 2.52823904e-02f, 4.17803258e-01f, 3.61596972e-01f, -6.68019354e-01f, -3.82832706e-01f, -7.11894691e-01f, -1.52507305e-01f, 3.81441474e-01f, -6.91375017e-01f, -3.71377289e-01f, -7.20630884e-01f, -1.52383953e-01f};
static const float lstm_state_y[40] = {1.12661153e-01f, -2.97809094e-01f, -2.29466870e-01f, -2.15513811e-01f, -1.12930285e-02f, 1.61946610e-01f, -3.49756777e-01f, -2.54587144e-01f, -2.98069447e-01f, -5.22981882e-02f, 2.04583913e-01f, -3.82125765e-01f, -2.60730267e-01f, -3.40620667e-01f, -8.04539919e-02f, 2.05338359e-01f, -3.95391524e-01f, -2.71985710e-01f, -3.79058540e-01f, -9.71277505e-02f, 1.22614233e-02f, 7.13582933e-02f, -1.95619717e-01f, -1.16678275e-01f, -1.82585284e-01f, 5.30240238e-02f, -1.03872418e-01f, -2.83994734e-01f, -2.05437928e-01f, -1.90343782e-01f, 1.19139157e-01f, -2.35880554e-01f, -3.14776629e-01f, -2.71596104e-01f, -1.78605452e-01f, 1.73627988e-01f, -3.18410724e-01f, -3.13643336e-01f, -3.18644911e-01f, -1.63962021e-01f};
static const float lstm_state_hn[20] = {-3.55993927e-01f, -1.34420320e-01f, -3.21223021e-01f, -3.55873294e-02f, 9.09855887e-02f, -2.01838374e-01f, -1.24130584e-01f, -4.51586932e-01f, -2.23353552e-03f, 1.25204042e-01f, 2.05338359e-01f, -3.95391524e-01f, -2.71985710e-01f, -3.79058540e-01f, -9.71277505e-02f, 1.73627988e-01f, -3.18410724e-01f, -3.13643336e-01f, -3.18644911e-01f, -1.63962021e-01f};
static const float lstm_state_cn[20] = {-4.95542467e-01f, -2.57954121e-01f, -5.13541341e-01f, -8.10594708e-02f, 3.04363310e-01f, -3.45369816e-01f, -2.40309313e-01f, -6.11844838e-01f, -8.61550868e-03f, 4.24313664e-01f, 3.93643498e-01f, -7.53334343e-01f, -3.89950454e-01f, -7.78499246e-01f, -1.63972139e-01f, 3.24321628e-01f, -5.72976351e-01f, -4.54990447e-01f, -6.19964242e-01f, -2.80824602e-01f};
static const float gru_y[40] = {1.48852468e-01f, -1.17958188e-01f, -1.34728730e-01f, -1.69010639e-01f, -1.36197284e-01f, 1.85492948e-01f, -1.79174244e-01f, -2.03008875e-01f, -3.13490063e-01f, -1.67485356e-01f, 1.85724780e-01f, -2.06269994e-01f, -2.42509902e-01f, -4.22346294e-01f, -1.61428988e-01f, 2.70632207e-01f, -2.78756350e-01f, -2.34813154e-01f, -4.94479358e-01f, -1.59593046e-01f, 1.33875966e-01f, -1.11324079e-01f, -1.34042919e-01f, -1.74116611e-01f, -1.28389478e-01f, 2.54224658e-01f, -1.97241843e-01f, -2.15037853e-01f, -2.82714307e-01f, -2.20652401e-01f, 2.10480243e-01f, -2.00729370e-01f, -2.70889729e-01f, -3.84665251e-01f, -2.23762274e-01f, 2.20644593e-01f, -2.35680103e-01f, -2.74852961e-01f, -4.72310066e-01f, -1.88411385e-01f};
static const float gru_hn[20] = {-2.71715015e-01f, -1.19445622e-02f, -4.20312226e-01f, -1.78439945e-01f, 4.02489871e-01f, -2.22306818e-01f, 1.03021368e-01f, -5.43468237e-01f, -1.09143347e-01f, 6.96125269e-01f, 2.70632207e-01f, -2.78756350e-01f, -2.34813154e-01f, -4.94479358e-01f, -1.59593046e-01f, 2.20644593e-01f, -2.35680103e-01f, -2.74852961e-01f, -4.72310066e-01f, -1.88411385e-01f};
static const float gru_state_y[40] = {2.26365462e-01f, -2.86280423e-01f, -3.42430651e-01f, -1.95911884e-01f, -1.30749643e-01f, 2.42316991e-01f, -2.66016722e-01f, -3.62945259e-01f, -2.96761215e-01f, -2.09670246e-01f, 2.16445476e-01f, -2.43821889e-01f, -3.65205169e-01f, -3.89670670e-01f, -2.16807604e-01f, 2.88566768e-01f, -2.92162120e-01f, -3.21415454e-01f, -4.60710198e-01f, -2.11045593e-01f, 1.05554037e-01f, 1.34418041e-01f, -2.49897689e-01f, -3.10153723e-01f, -3.51196498e-01f, 1.98555917e-01f, 7.86001980e-03f, -3.33602965e-01f, -3.65274072e-01f, -3.82731974e-01f, 1.55196801e-01f, -5.03071100e-02f, -3.76276940e-01f, -4.29719210e-01f, -3.51807863e-01f, 1.85576305e-01f, -1.31136626e-01f, -3.59172910e-01f, -4.95082974e-01f, -2.87069231e-01f};
static const float gru_state_hn[20] = {-2.93199360e-01f, 3.23407650e-02f, -3.62311929e-01f, -2.10319072e-01f, 4.16459620e-01f, -1.92456901e-01f, 7.42358565e-02f, -5.08851290e-01f, -1.11170024e-01f, 7.02652574e-01f, 2.88566768e-01f, -2.92162120e-01f, -3.21415454e-01f, -4.60710198e-01f, -2.11045593e-01f, 1.85576305e-01f, -1.31136626e-01f, -3.59172910e-01f, -4.95082974e-01f, -2.87069231e-01f};

enum { B = 2, T = 4, IN = 3, H = 5, L = 2 };

static void fill_formula(float *p, int64_t n, double a, double b, double scale, bool use_cos) {
    for (int64_t j = 0; j < n; j++) {
        double v = a * (double)j + b;
        p[j] = (float)(scale * (use_cos ? cos(v) : sin(v)));
    }
}

static mg_layer *make_rnn(bool gru, const char *prefix, mg_params *P) {
    mg_layer *l = gru ? mg_gru_new(P, prefix, &(mg_gru_cfg){.input_size = IN, .hidden_size = H, .num_layers = L})
                      : mg_lstm_new(P, prefix, &(mg_lstm_cfg){.input_size = IN, .hidden_size = H, .num_layers = L});
    ck_assert_msg(l, "%s", mg_last_error());
    return l;
}

/* PyTorch's named_parameters order. */
static const char *const param_order[] = {"rnn.weight_ih_l0", "rnn.weight_hh_l0", "rnn.bias_ih_l0", "rnn.bias_hh_l0",
                                          "rnn.weight_ih_l1", "rnn.weight_hh_l1", "rnn.bias_ih_l1", "rnn.bias_hh_l1"};

static void expect_close(const char *what, const float *got, const float *want, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(fabsf(got[i] - want[i]) <= 2e-6f + 1e-5f * fabsf(want[i]), "%s[%lld] = %.8g, PyTorch %.8g", what,
                      (long long)i, got[i], want[i]);
}

START_TEST(matches_pytorch) {
    static const struct {
        bool gru, state;
        const float *y, *hn, *cn;
    } cases[] = {{false, false, lstm_y, lstm_hn, lstm_cn},
                 {false, true, lstm_state_y, lstm_state_hn, lstm_state_cn},
                 {true, false, gru_y, gru_hn, NULL},
                 {true, true, gru_state_y, gru_state_hn, NULL}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const bool gru = cases[c].gru;
        mg_params *P = mg_params_new();
        mg_layer *l = make_rnn(gru, "rnn", P);
        mg_rng rng = mg_rng_make(1);
        ck_assert(mg_params_alloc(P, &rng) == MG_OK);
        ck_assert_int_eq(mg_params_len(P), 8);
        for (int k = 0; k < 8; k++) {
            mg_tensor *p = mg_params_find(P, param_order[k]);
            ck_assert_msg(p, "%s missing", param_order[k]);
            fill_formula(p->data, p->numel, 0.7, 1.3 * k + 0.1, 0.5, false);
        }
        mg_ctx *ctx = mg_ctx_new(0);
        mg_tensor *x = mg_tensor_new(ctx, MG_F32, 3, (int64_t[]){B, T, IN});
        fill_formula(x->data, x->numel, 0.45, 0.2, 1.0, true);
        if (cases[c].state) {
            mg_tensor *h0 = mg_tensor_new(ctx, MG_F32, 3, (int64_t[]){L, B, H});
            mg_tensor *c0 = gru ? NULL : mg_tensor_new(ctx, MG_F32, 3, (int64_t[]){L, B, H});
            fill_formula(h0->data, h0->numel, 0.9, 0.5, 0.3, false);
            if (c0) fill_formula(c0->data, c0->numel, 0.8, 0.1, 0.3, true);
            mg_rnn_set_initial_state(l, h0, c0);
        }
        mg_tensor *y = mg_layer_forward(l, ctx, x, NULL);
        ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
        ck_assert_int_eq(y->ndim, 3);
        ck_assert(y->shape[0] == B && y->shape[1] == T && y->shape[2] == H);
        mg_tensor *cn = NULL, *hn = mg_rnn_final_state(l, &cn);
        ck_assert_ptr_nonnull(hn);
        ck_assert(hn->ndim == 3 && hn->shape[0] == L && hn->shape[1] == B && hn->shape[2] == H);
        char what[64];
        snprintf(what, sizeof what, "%s%s y", gru ? "gru" : "lstm", cases[c].state ? " with h0" : "");
        expect_close(what, y->data, cases[c].y, B * T * H);
        expect_close("h_n", hn->data, cases[c].hn, L * B * H);
        if (gru)
            ck_assert_ptr_null(cn);
        else
            expect_close("c_n", cn->data, cases[c].cn, L * B * H);
        mg_ctx_free(ctx);
        mg_layer_free(l);
        mg_params_free(P);
    }
}
END_TEST

/* Steps 0..5 in one forward, or 0..2 then 3..5 from the first half's final state: the same output,
 * and gradients flow through the carried state into the first half's weights. */
START_TEST(state_carries_across_forwards) {
    for (int gru = 0; gru < 2; gru++) {
        mg_params *P = mg_params_new();
        mg_layer *l = make_rnn(gru, "rnn", P);
        mg_rng rng = mg_rng_make(2);
        ck_assert(mg_params_alloc(P, &rng) == MG_OK);
        mg_ctx *ctx = mg_ctx_new(0);
        mg_tensor *x = mg_tensor_new(ctx, MG_F32, 3, (int64_t[]){B, 6, IN});
        fill_formula(x->data, x->numel, 0.31, 0.4, 1.0, false);
        mg_tensor *whole = mg_layer_forward(l, ctx, x, NULL);
        mg_tensor *y1 = mg_layer_forward(l, ctx, mg_narrow(ctx, x, 1, 0, 3), NULL);
        mg_tensor *c1 = NULL, *h1 = mg_rnn_final_state(l, &c1);
        mg_rnn_set_initial_state(l, h1, c1);
        mg_tensor *y2 = mg_layer_forward(l, ctx, mg_narrow(ctx, x, 1, 3, 3), NULL);
        mg_tensor *halves = mg_cat(ctx, (mg_tensor *[]){y1, y2}, 2, 1);
        ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
        for (int64_t i = 0; i < whole->numel; i++)
            ck_assert_msg(fabsf(whole->data[i] - halves->data[i]) <= 1e-6f, "%s [%lld]: %g vs %g", gru ? "gru" : "lstm",
                          (long long)i, whole->data[i], halves->data[i]);
        /* the second half alone depends on the first layer's input weights only through h1 (and c1) */
        mg_backward(ctx, mg_sum(ctx, y2));
        ck_assert_msg(mg_ctx_ok(ctx), "%s", mg_ctx_error(ctx));
        mg_tensor *w = mg_params_find(P, "rnn.weight_ih_l0");
        double g = 0;
        for (int64_t i = 0; i < w->numel; i++) g += fabs(w->grad[i]);
        ck_assert_msg(g > 0, "no gradient reached %s", w->name);
        mg_ctx_free(ctx);
        mg_layer_free(l);
        mg_params_free(P);
    }
}
END_TEST

typedef struct {
    char names[32][64];
    int64_t numel[32];
    int n;
} plist;

static void collect(void *user, const char *name, mg_tensor *t) {
    plist *l = user;
    if (l->n < 32) snprintf(l->names[l->n], 64, "%s", name), l->numel[l->n++] = t->numel;
}

START_TEST(pytorch_names_shapes_and_init) {
    mg_params *P = mg_params_new();
    mg_layer *a = mg_lstm_new(P, "enc", &(mg_lstm_cfg){.input_size = 3, .hidden_size = 4, .num_layers = 2});
    mg_layer *g = mg_gru_new(P, "dec", &(mg_gru_cfg){.input_size = 7, .hidden_size = 2, .no_bias = true});
    ck_assert_msg(a && g, "%s", mg_last_error());
    mg_rng rng = mg_rng_make(3);
    ck_assert(mg_params_alloc(P, &rng) == MG_OK);
    plist pl = {.n = 0};
    mg_layer_visit_params(a, collect, &pl);
    mg_layer_visit_params(g, collect, &pl);
    static const char *const names[] = {"enc.weight_ih_l0", "enc.weight_hh_l0", "enc.bias_ih_l0", "enc.bias_hh_l0",
                                        "enc.weight_ih_l1", "enc.weight_hh_l1", "enc.bias_ih_l1", "enc.bias_hh_l1",
                                        "dec.weight_ih_l0", "dec.weight_hh_l0"};
    static const int64_t numel[] = {16 * 3, 16 * 4, 16, 16, 16 * 4, 16 * 4, 16, 16, 6 * 7, 6 * 2};
    ck_assert_int_eq(pl.n, 10);
    for (int i = 0; i < 10; i++) {
        ck_assert_str_eq(pl.names[i], names[i]);
        ck_assert_int_eq(pl.numel[i], numel[i]);
        mg_tensor *p = mg_params_find(P, names[i]);
        ck_assert_int_eq(p->shape[0], i < 8 ? 16 : 6);
        /* uniform(-1/sqrt(H), 1/sqrt(H)) and not all one value */
        const float k = 1.0f / sqrtf(i < 8 ? 4.0f : 2.0f);
        float lo = 1, hi = -1;
        for (int64_t j = 0; j < p->numel; j++) lo = fminf(lo, p->data[j]), hi = fmaxf(hi, p->data[j]);
        ck_assert_msg(lo >= -k && hi <= k && hi - lo > 0.2f * k, "%s in [%g, %g], want within +-%g", names[i], lo, hi, k);
    }
    ck_assert_ptr_null(mg_rnn_final_state(a, NULL)); /* no forward yet */
    mg_layer_free(a), mg_layer_free(g);
    mg_params_free(P);
}
END_TEST

static mg_status make_from_config(const char *type, const char *list, mg_params *P, mg_layer **out) {
    mg_config *cfg = mg_config_new(type);
    mg_status st = mg_config_set_list(cfg, list);
    if (st == MG_OK) st = mg_layer_create(type, "rnn", cfg, P, out);
    mg_config_free(cfg);
    return st;
}

START_TEST(typed_constructor_matches_config) {
    for (int gru = 0; gru < 2; gru++) {
        mg_params *A = mg_params_new(), *Bp = mg_params_new();
        mg_layer *ta = make_rnn(gru, "rnn", A), *tb = NULL;
        ck_assert_msg(make_from_config(gru ? "gru" : "lstm", "input_size=3,hidden_size=5,num_layers=2", Bp, &tb) == MG_OK,
                      "%s", mg_last_error());
        mg_rng ra = mg_rng_make(5), rb = mg_rng_make(5);
        ck_assert(mg_params_alloc(A, &ra) == MG_OK && mg_params_alloc(Bp, &rb) == MG_OK);
        ck_assert_int_eq(mg_params_len(A), mg_params_len(Bp));
        for (int i = 0; i < mg_params_len(A); i++) {
            mg_tensor *pa = mg_params_at(A, i), *pb = mg_params_find(Bp, pa->name);
            ck_assert_msg(pb, "%s missing from the config-built layer", pa->name);
            ck_assert(mg_same_shape(pa, pb));
            ck_assert_mem_eq(pa->data, pb->data, (size_t)pa->numel * sizeof(float));
        }
        ck_assert_str_eq(mg_layer_vt(tb)->name, gru ? "gru" : "lstm");
        ck_assert_str_eq(mg_layer_origin(gru ? "gru" : "lstm"), "built-in");
        mg_layer *nb = NULL;
        ck_assert(make_from_config(gru ? "gru" : "lstm", "input_size=3,hidden_size=5,bias=false", A, &nb) != MG_OK);
        mg_params *C = mg_params_new();
        ck_assert(make_from_config(gru ? "gru" : "lstm", "input_size=3,hidden_size=5,bias=false", C, &nb) == MG_OK);
        ck_assert_int_eq(mg_params_len(C), 2);
        mg_layer_free(ta), mg_layer_free(tb), mg_layer_free(nb);
        mg_params_free(A), mg_params_free(Bp), mg_params_free(C);
    }
}
END_TEST

START_TEST(errors_name_the_layer_and_field) {
    mg_params *P = mg_params_new();
    ck_assert_ptr_null(mg_lstm_new(P, "bad", &(mg_lstm_cfg){.input_size = 3}));
    ck_assert_str_eq(mg_last_error(), "layer 'bad' (lstm): input_size = 3 and hidden_size = 0 must be in [1, 2147483647]");
    ck_assert_ptr_null(mg_gru_new(P, "bad", &(mg_gru_cfg){.input_size = 3, .hidden_size = 2, .num_layers = 17}));
    ck_assert_str_eq(mg_last_error(), "layer 'bad' (gru): num_layers = 17 must be in [1, 16]");
    ck_assert_ptr_null(mg_gru_new(P, "bad", &(mg_gru_cfg){.input_size = 3, .hidden_size = 2, .num_layers = -1}));
    ck_assert_str_eq(mg_last_error(), "layer 'bad' (gru): num_layers = -1 must be in [1, 16]");
    mg_layer *l = NULL;
    ck_assert(make_from_config("lstm", "input_size=3", P, &l) != MG_OK);
    ck_assert_msg(strstr(mg_last_error(), "hidden_size"), "%s", mg_last_error());
    ck_assert_int_eq(mg_params_len(P), 0);

    mg_layer *a = make_rnn(false, "rnn", P), *g = make_rnn(true, "gru", P);
    mg_rng rng = mg_rng_make(3);
    ck_assert(mg_params_alloc(P, &rng) == MG_OK);
    tu_trap t;
    mg_ctx *ctx = tu_trapping_ctx(&t, 0);
    mg_tensor *x = mg_zeros(ctx, 3, (int64_t[]){B, T, IN});
    mg_tensor *bad_in = mg_zeros(ctx, 3, (int64_t[]){B, T, IN + 1});
    mg_tensor *flat = mg_zeros(ctx, 2, (int64_t[]){B, IN});
    mg_tensor *empty = mg_zeros(ctx, 3, (int64_t[]){B, 0, IN});
    mg_tensor *h_bad = mg_zeros(ctx, 3, (int64_t[]){L, B + 1, H});
    mg_tensor *h_ok = mg_zeros(ctx, 3, (int64_t[]){L, B, H});
#define EXPECT(layer, input, message)                                                              \
    do {                                                                                           \
        ck_assert_ptr_nonnull(mg_layer_forward(layer, ctx, input, NULL));                          \
        ck_assert_msg(!mg_ctx_ok(ctx), "no error for %s", message);                                \
        ck_assert_str_eq(t.msg, message);                                                          \
        mg_ctx_clear_error(ctx);                                                                   \
    } while (0)
    EXPECT(a, bad_in, "layer 'rnn' (lstm): x(2,4,4): need float32 (B,T,input_size) with input_size = 3 and T >= 1 (batch first)");
    EXPECT(a, flat, "layer 'rnn' (lstm): x(2,3): need float32 (B,T,input_size) with input_size = 3 and T >= 1 (batch first)");
    EXPECT(g, empty, "layer 'gru' (gru): x(2,0,3): need float32 (B,T,input_size) with input_size = 3 and T >= 1 (batch first)");
    mg_rnn_set_initial_state(a, h_bad, NULL);
    EXPECT(a, x, "layer 'rnn' (lstm): initial state h0(2,3,5): need float32 (num_layers, B, hidden_size) = (2,2,5)");
    mg_rnn_set_initial_state(a, h_ok, h_bad);
    EXPECT(a, x, "layer 'rnn' (lstm): initial state c0(2,3,5): need float32 (num_layers, B, hidden_size) = (2,2,5)");
    mg_rnn_set_initial_state(g, h_ok, h_ok);
    EXPECT(g, x, "layer 'gru' (gru): a gru has no cell state: initial c0(2,2,5) given");
#undef EXPECT
    /* a failed forward forgets the state it was given; the next one starts from zeros */
    mg_tensor *y = mg_layer_forward(g, ctx, x, NULL);
    ck_assert_msg(mg_ctx_ok(ctx), "%s", t.msg);
    ck_assert_ptr_nonnull(y);
    ck_assert_ptr_nonnull(mg_rnn_final_state(g, NULL));
    /* not a recurrent layer, or none: no state; setting one is raised by the layer's next forward
     * (once: the one after runs) */
    mg_params *Q = mg_params_new();
    mg_layer *lin = mg_linear_new(Q, "fc", &(mg_linear_cfg){.in = 2, .out = 2});
    ck_assert(mg_params_alloc(Q, &rng) == MG_OK);
    mg_tensor *cn = x;
    mg_rnn_set_initial_state(lin, h_ok, NULL);
    ck_assert_ptr_null(mg_rnn_final_state(lin, &cn));
    ck_assert_ptr_null(cn);
    ck_assert_ptr_null(mg_rnn_final_state(NULL, NULL));
    mg_rnn_set_initial_state(NULL, h_ok, NULL); /* nothing to raise it on; no crash */
    mg_tensor *xl = mg_zeros(ctx, 2, (int64_t[]){B, 2});
    t.calls = 0;
    ck_assert_ptr_nonnull(mg_layer_forward(lin, ctx, xl, NULL));
    ck_assert_int_eq(t.calls, 1);
    ck_assert_str_eq(t.msg, "layer 'fc' (linear, built-in): mg_rnn_set_initial_state: a linear layer has no recurrent "
                            "state (lstm or gru only)");
    mg_ctx_clear_error(ctx);
    mg_layer_forward(lin, ctx, xl, NULL);
    ck_assert_msg(mg_ctx_ok(ctx), "%s", t.msg);
    /* clearing the state (NULL, NULL), as code that resets every layer does, asks nothing of it */
    mg_rnn_set_initial_state(lin, NULL, NULL);
    t.calls = 0;
    mg_layer_forward(lin, ctx, xl, NULL);
    ck_assert_msg(mg_ctx_ok(ctx) && t.calls == 0, "%s", t.msg);
    mg_layer_free(lin);
    mg_params_free(Q);
    mg_ctx_free(ctx);
    mg_layer_free(a), mg_layer_free(g);
    mg_params_free(P);
}
END_TEST

static Suite *rnn_suite(void) {
    Suite *s = suite_create("rnn");
    TCase *tc = tcase_create("rnn");
    tcase_add_test(tc, matches_pytorch);
    tcase_add_test(tc, state_carries_across_forwards);
    tcase_add_test(tc, pytorch_names_shapes_and_init);
    tcase_add_test(tc, typed_constructor_matches_config);
    tcase_add_test(tc, errors_name_the_layer_and_field);
    suite_add_tcase(s, tc);
    return s;
}

MG_TEST_MAIN(rnn_suite)
